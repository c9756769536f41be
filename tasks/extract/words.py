"""Word pools the extract generator draws from (invented names; any likeness is chance)."""

FIRST_NAMES = [
    "Maria", "James", "Aiko", "Olu", "Priya", "Lars", "Fatima", "Diego", "Chen", "Amara",
    "Tomasz", "Sofia", "Kwame", "Ingrid", "Ravi", "Elena", "Mateo", "Yuki", "Noah", "Leila",
    "Hannah", "Omar", "Grace", "Luca", "Zara", "Felix", "Nadia", "Samuel", "Ana", "Jonas",
]
LAST_NAMES = [
    "Lopez", "Okafor", "Tanaka", "Novak", "Schmidt", "Haddad", "Patel", "Kowalski", "Moreau",
    "Nguyen", "Silva", "Andersen", "Mensah", "Rossi", "Kim", "Fischer", "Ibrahim", "Costa",
    "Murphy", "Larsen", "Petrov", "Dubois", "Yamamoto", "Garcia", "Osei", "Weber",
]
OCCUPATIONS = [
    "nurse", "software engineer", "teacher", "architect", "chef", "electrician", "pharmacist",
    "journalist", "accountant", "photographer", "veterinarian", "pilot", "librarian",
]
STREETS = [
    "Oak Street", "Maple Avenue", "Harbor Road", "Elm Lane", "Station Road", "Hillcrest Drive",
    "Mill Street", "River Walk", "Church Lane", "Park Avenue", "Cedar Court", "Kingsway",
]
CITIES = [
    ("Springfield", "USA"), ("Leeds", "United Kingdom"), ("Lyon", "France"),
    ("Porto", "Portugal"), ("Graz", "Austria"), ("Osaka", "Japan"), ("Accra", "Ghana"),
    ("Halifax", "Canada"), ("Bergen", "Norway"), ("Cordoba", "Argentina"),
    ("Pune", "India"), ("Gdansk", "Poland"), ("Adelaide", "Australia"), ("Utrecht", "Netherlands"),
]
LANGUAGES = [
    "English", "Spanish", "French", "German", "Japanese", "Hindi", "Portuguese", "Polish",
    "Arabic", "Swahili", "Mandarin", "Norwegian", "Italian", "Korean",
]
ROLES = ["admin", "editor", "viewer"]
RELATIONS = ["parent", "sibling", "partner", "friend", "colleague"]
EMAIL_DOMAINS = ["example.com", "mail.example.org", "example.net"]

PRODUCT_NOUNS = [
    "desk lamp", "water bottle", "backpack", "office chair", "kettle", "headphones",
    "yoga mat", "bookshelf", "coffee grinder", "rain jacket", "tent", "keyboard",
]
PRODUCT_ADJECTIVES = [
    "Compact", "Classic", "Ultralight", "Deluxe", "Eco", "Pro", "Nordic", "Urban", "Summit",
]
PRODUCT_CATEGORIES = ["home", "outdoor", "electronics", "furniture", "kitchen", "apparel"]
COLORS = ["black", "white", "red", "blue", "green", "grey", "yellow", "orange"]

ORDER_STATUSES = ["pending", "paid", "shipped", "delivered", "cancelled"]
CURRENCIES = ["USD", "EUR", "GBP"]
ORDER_TAGS = ["gift", "express", "fragile", "first-order", "bulk", "return-customer"]

EVENT_KINDS = ["conference", "concert", "workshop", "meetup", "festival"]
EVENT_WORDS = [
    "Harvest", "Northern Lights", "Open Source", "Jazz", "Data", "Spring", "Makers",
    "Climate", "Indie Film", "Robotics", "Street Food", "Poetry",
]
VENUES = [
    "Riverside Hall", "the Old Mill", "Central Library", "Pier 9", "the Glasshouse",
    "Union Theatre", "Hilltop Park", "the Foundry",
]
TOPICS = [
    "machine learning", "accessibility", "urban farming", "security", "design", "robotics",
    "music production", "open data", "sustainability", "education",
]
SESSION_WORDS = [
    "Keynote", "Hands-on Lab", "Panel", "Lightning Talks", "Fireside Chat", "Closing Remarks",
]

ADDRESS_KINDS = ["home", "work", "billing", "shipping"]
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
MOVE_REASONS = ["job", "family", "study", "retirement"]
MONTHS = [
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
]
