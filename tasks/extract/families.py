"""The record families of the ``extract`` pack: a JSON Schema per level, a record and its prose.

Each family builds ``(schema, record, sentences)`` from a seeded ``random.Random``. Levels add
features on top of the previous one:

1. three required scalar fields;
2. enums, formats (email, ipv4, uri, date, date-time), a float and an optional field that is
   sometimes left out (the text then does not mention it, and neither may the answer);
3. a nested object and an array the schema marks as a set (``uniqueItems``);
4. an array of objects, and dates written out in words that must be given as ISO 8601.

The families use different drafts (4, 6, 7, 2019-09, 2020-12) so every validator class is
exercised. Every object has ``additionalProperties: false``: invented fields fail the schema.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from tasks.extract import words as w

Built = tuple[dict[str, Any], dict[str, Any], list[str]]

DRAFT = {
    4: "http://json-schema.org/draft-04/schema#",
    6: "http://json-schema.org/draft-06/schema#",
    7: "http://json-schema.org/draft-07/schema#",
    2019: "https://json-schema.org/draft/2019-09/schema",
    2020: "https://json-schema.org/draft/2020-12/schema",
}
STR: dict[str, Any] = {"type": "string", "minLength": 1}
INT: dict[str, Any] = {"type": "integer", "minimum": 0}
NUM: dict[str, Any] = {"type": "number"}


def obj(props: dict[str, Any], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": props,
            "required": [k for k in props if k not in optional], "additionalProperties": False}


def enum(values: list[str]) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


def fmt(name: str) -> dict[str, Any]:
    return {"type": "string", "format": name}


def string_set(values: list[str] | None = None) -> dict[str, Any]:
    items = enum(values) if values else STR
    return {"type": "array", "items": items, "minItems": 1, "uniqueItems": True}


def array_of(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": item, "minItems": 1}


def root(draft: int, title: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"$schema": DRAFT[draft], "title": title, **schema}


# -- value helpers ------------------------------------------------------------------------------
def person_name(rng: random.Random) -> str:
    return f"{rng.choice(w.FIRST_NAMES)} {rng.choice(w.LAST_NAMES)}"


def email_for(rng: random.Random, name: str) -> str:
    first, last = name.lower().split(" ", 1)
    return f"{first}.{last.replace(' ', '')}@{rng.choice(w.EMAIL_DOMAINS)}"


def phone(rng: random.Random) -> str:
    return f"+1-555-{rng.randint(100, 999):03d}-{rng.randint(0, 9999):04d}"


def date_parts(rng: random.Random, first_year: int = 2015) -> tuple[int, int, int]:
    return rng.randint(first_year, 2025), rng.randint(1, 12), rng.randint(1, 28)


def iso_date(parts: tuple[int, int, int]) -> str:
    return "{:04d}-{:02d}-{:02d}".format(*parts)


def spoken_date(parts: tuple[int, int, int]) -> str:
    year, month, day = parts
    return f"{w.MONTHS[month - 1]} {day}, {year}"


def datetime_value(rng: random.Random, level: int) -> tuple[str, str]:
    """(ISO 8601 value, how the text says it): spelled out in words at level 4."""
    parts = date_parts(rng, 2022)
    hour, minute = rng.randint(7, 21), rng.choice([0, 15, 30, 45])
    iso = f"{iso_date(parts)}T{hour:02d}:{minute:02d}:00Z"
    if level < 4:
        return iso, iso
    return iso, f"{spoken_date(parts)} at {hour:02d}:{minute:02d} UTC"


def street(rng: random.Random) -> str:
    return f"{rng.randint(1, 240)} {rng.choice(w.STREETS)}"


def money(rng: random.Random, low: float, high: float) -> float:
    return round(rng.uniform(low, high), 2)


def join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def sample(rng: random.Random, pool: list[str], low: int, high: int) -> list[str]:
    return rng.sample(pool, rng.randint(low, high))


def address_value(rng: random.Random) -> dict[str, str]:
    city, country = rng.choice(w.CITIES)
    return {"street": street(rng), "city": city, "country": country}


ADDRESS = obj({"street": STR, "city": STR, "country": STR})


# -- families -----------------------------------------------------------------------------------
def person(rng: random.Random, level: int) -> Built:
    props: dict[str, Any] = {"name": STR, "age": {"type": "integer", "minimum": 18,
                                                   "maximum": 99}, "occupation": STR}
    name = person_name(rng)
    first = name.split()[0]
    rec: dict[str, Any] = {"name": name, "age": rng.randint(18, 90),
                           "occupation": rng.choice(w.OCCUPATIONS)}
    text = [rng.choice([
        f"{name} is a {rec['age']}-year-old {rec['occupation']}.",
        f"Meet {name}, aged {rec['age']}, who works as a {rec['occupation']}.",
    ])]
    optional: tuple[str, ...] = ()
    if level >= 2:
        props.update(email=fmt("email"), role=enum(w.ROLES), height_m=NUM,
                     last_login_ip=fmt("ipv4"))
        optional = ("last_login_ip",)
        rec.update(email=email_for(rng, name), role=rng.choice(w.ROLES),
                   height_m=round(rng.uniform(1.5, 2.0), 2))
        text.append(f"{first} can be reached at {rec['email']}, is {rec['height_m']} m tall "
                    f"and has {rec['role']} rights on the team workspace.")
        if rng.random() < 0.5:
            rec["last_login_ip"] = ".".join(str(rng.randint(1, 254)) for _ in range(4))
            text.append(f"The last login came from the address {rec['last_login_ip']}.")
    if level >= 3:
        props.update(address=ADDRESS, languages=string_set())
        rec.update(address=address_value(rng), languages=sample(rng, w.LANGUAGES, 1, 3))
        a = rec["address"]
        text.append(f"{first} lives at {a['street']} in {a['city']}, {a['country']}, "
                    f"and speaks {join(rec['languages'])}.")
    if level >= 4:
        contact = obj({"name": STR, "relation": enum(w.RELATIONS), "phone": STR})
        props.update(emergency_contacts=array_of(contact), member_since=fmt("date"))
        rec["emergency_contacts"] = [
            {"name": person_name(rng), "relation": rng.choice(w.RELATIONS), "phone": phone(rng)}
            for _ in range(rng.randint(1, 2))]
        parts = date_parts(rng)
        rec["member_since"] = iso_date(parts)
        who = [f"{c['name']} (their {c['relation']}, {c['phone']})"
               for c in rec["emergency_contacts"]]
        text.append(f"In an emergency, call {' or '.join(who)}.")
        text.append(f"{first} has been a member since {spoken_date(parts)}.")
    return root(7, "Person", obj(props, optional)), rec, text


def order(rng: random.Random, level: int) -> Built:
    props: dict[str, Any] = {"order_id": {"type": "string", "pattern": "^ORD-[0-9]{5}$"},
                             "customer": STR, "item_count": INT}
    rec: dict[str, Any] = {"order_id": f"ORD-{rng.randint(10000, 99999)}",
                           "customer": person_name(rng), "item_count": rng.randint(1, 9)}
    items: list[dict[str, Any]] = []
    if level >= 4:
        for _ in range(rng.randint(1, 3)):
            noun = rng.choice(w.PRODUCT_NOUNS)
            items.append({"sku": f"SKU-{rng.randint(1000, 9999)}",
                          "name": f"{rng.choice(w.PRODUCT_ADJECTIVES)} {noun}",
                          "quantity": rng.randint(1, 4), "unit_price": money(rng, 5, 120)})
        rec["item_count"] = sum(i["quantity"] for i in items)
    text = [f"Order {rec['order_id']} was placed by {rec['customer']} for "
            f"{rec['item_count']} item{'s' if rec['item_count'] > 1 else ''}."]
    optional: tuple[str, ...] = ()
    if level >= 2:
        props.update(status=enum(w.ORDER_STATUSES), total=NUM, currency=enum(w.CURRENCIES),
                     placed_at=fmt("date-time"), coupon=STR)
        optional = ("coupon",)
        placed, said = datetime_value(rng, level)
        total = round(sum(i["quantity"] * i["unit_price"] for i in items), 2) if items \
            else money(rng, 10, 900)
        rec.update(status=rng.choice(w.ORDER_STATUSES), total=total,
                   currency=rng.choice(w.CURRENCIES), placed_at=placed)
        text.append(f"It was placed on {said}, comes to {rec['total']:.2f} {rec['currency']} "
                    f"in total and its status is {rec['status']}.")
        if rng.random() < 0.5:
            rec["coupon"] = f"SAVE{rng.choice([5, 10, 15, 20])}"
            text.append(f"The customer used the coupon code {rec['coupon']}.")
    if level >= 3:
        props.update(shipping_address=ADDRESS, tags=string_set(w.ORDER_TAGS))
        rec.update(shipping_address=address_value(rng), tags=sample(rng, w.ORDER_TAGS, 1, 3))
        a = rec["shipping_address"]
        text.append(f"It ships to {a['street']}, {a['city']}, {a['country']}; the order is "
                    f"tagged {join(rec['tags'])}.")
    if level >= 4:
        props["items"] = array_of(obj({"sku": STR, "name": STR, "quantity": INT,
                                       "unit_price": NUM}))
        rec["items"] = items
        lines = [f"{i['quantity']} x {i['name']} ({i['sku']}) at {i['unit_price']:.2f} each"
                 for i in items]
        text.append(f"The order contains {join(lines)}.")
    return root(2020, "Order", obj(props, optional)), rec, text


def event(rng: random.Random, level: int) -> Built:
    props: dict[str, Any] = {"title": STR, "venue": STR, "capacity": INT}
    year = rng.randint(2022, 2026)
    rec: dict[str, Any] = {"title": f"{rng.choice(w.EVENT_WORDS)} {year}",
                           "venue": rng.choice(w.VENUES), "capacity": rng.randint(2, 60) * 25}
    text = [rng.choice([
        f"{rec['title']} takes place at {rec['venue']}, which holds {rec['capacity']} people.",
        f"Up to {rec['capacity']} guests can attend {rec['title']} at {rec['venue']}.",
    ])]
    optional: tuple[str, ...] = ()
    if level >= 2:
        props.update(category=enum(w.EVENT_KINDS), starts_at=fmt("date-time"),
                     ticket_price=NUM, website=fmt("uri"))
        optional = ("website",)
        start, said = datetime_value(rng, level)
        rec.update(category=rng.choice(w.EVENT_KINDS), starts_at=start,
                   ticket_price=money(rng, 0, 150))
        text.append(f"This {rec['category']} starts on {said} and tickets cost "
                    f"{rec['ticket_price']:.2f}.")
        if rng.random() < 0.5:
            slug = rec["title"].lower().replace(" ", "-")
            rec["website"] = f"https://events.example.com/{slug}"
            text.append(f"Details are online at {rec['website']}.")
    if level >= 3:
        props.update(organizer=obj({"name": STR, "email": fmt("email")}),
                     topics=string_set())
        name = person_name(rng)
        rec.update(organizer={"name": name, "email": email_for(rng, name)},
                   topics=sample(rng, w.TOPICS, 1, 3))
        text.append(f"It is organised by {name} ({rec['organizer']['email']}) and covers "
                    f"{join(rec['topics'])}.")
    if level >= 4:
        props["sessions"] = array_of(obj({"title": STR, "speaker": STR,
                                          "duration_minutes": INT}))
        rec["sessions"] = [{"title": t, "speaker": person_name(rng),
                            "duration_minutes": rng.choice([15, 30, 45, 60, 90])}
                           for t in sample(rng, w.SESSION_WORDS, 1, 3)]
        parts = [f"\"{s['title']}\" by {s['speaker']} ({s['duration_minutes']} minutes)"
                 for s in rec["sessions"]]
        text.append(f"The programme, in order: {join(parts)}.")
    return root(2019, "Event", obj(props, optional)), rec, text


def product(rng: random.Random, level: int) -> Built:
    props: dict[str, Any] = {"sku": STR, "name": STR, "stock": INT}
    noun = rng.choice(w.PRODUCT_NOUNS)
    rec: dict[str, Any] = {"sku": f"SKU-{rng.randint(1000, 9999)}",
                           "name": f"{rng.choice(w.PRODUCT_ADJECTIVES)} {noun}",
                           "stock": rng.randint(0, 500)}
    text = [rng.choice([
        f"The {rec['name']} (SKU {rec['sku']}) has {rec['stock']} units in stock.",
        f"We have {rec['stock']} units of the {rec['name']} in the warehouse; "
        f"its SKU is {rec['sku']}.",
    ])]
    optional: tuple[str, ...] = ()
    if level >= 2:
        props.update(price=NUM, category=enum(w.PRODUCT_CATEGORIES),
                     discontinued={"type": "boolean"}, released=fmt("date"))
        optional = ("released",)
        rec.update(price=money(rng, 3, 400), category=rng.choice(w.PRODUCT_CATEGORIES),
                   discontinued=rng.random() < 0.3)
        status = "has been discontinued" if rec["discontinued"] else "is still being made"
        text.append(f"It sells for {rec['price']:.2f} in the {rec['category']} category and "
                    f"{status}.")
        if rng.random() < 0.5:
            parts = date_parts(rng)
            rec["released"] = iso_date(parts)
            said = spoken_date(parts) if level >= 4 else rec["released"]
            text.append(f"It was released on {said}.")
    if level >= 3:
        props.update(dimensions=obj({"width_cm": NUM, "height_cm": NUM, "depth_cm": NUM}),
                     colors=string_set(w.COLORS))
        dims = {k: round(rng.uniform(5, 120), 1) for k in ("width_cm", "height_cm", "depth_cm")}
        rec.update(dimensions=dims, colors=sample(rng, w.COLORS, 1, 3))
        text.append(f"It measures {dims['width_cm']} cm wide, {dims['height_cm']} cm high and "
                    f"{dims['depth_cm']} cm deep, and comes in {join(rec['colors'])}.")
    if level >= 4:
        props["variants"] = array_of(obj({"sku": STR, "color": enum(w.COLORS), "price": NUM}))
        rec["variants"] = [{"sku": f"{rec['sku']}-{c.upper()}", "color": c,
                            "price": money(rng, 3, 400)} for c in rec["colors"]]
        shown = [f"{v['color']} ({v['sku']}, {v['price']:.2f})" for v in rec["variants"]]
        text.append(f"Variants: {join(shown)}.")
    return root(6, "Product", obj(props, optional)), rec, text


def address(rng: random.Random, level: int) -> Built:
    place = address_value(rng)
    rec: dict[str, Any] = dict(place)
    props: dict[str, Any] = {"street": STR, "city": STR, "country": STR}
    text = [rng.choice([
        f"The address is {place['street']}, {place['city']}, {place['country']}.",
        f"Send it to {place['street']} in {place['city']} ({place['country']}).",
    ])]
    optional: tuple[str, ...] = ()
    if level >= 2:
        props.update(kind=enum(w.ADDRESS_KINDS),
                     postal_code={"type": "string", "pattern": "^[0-9]{5}$"},
                     latitude={"type": "number", "minimum": -90, "maximum": 90},
                     longitude={"type": "number", "minimum": -180, "maximum": 180},
                     verified_on=fmt("date"))
        optional = ("verified_on",)
        rec.update(kind=rng.choice(w.ADDRESS_KINDS), postal_code=f"{rng.randint(10000, 99999)}",
                   latitude=round(rng.uniform(-60, 70), 4),
                   longitude=round(rng.uniform(-170, 170), 4))
        text.append(f"It is a {rec['kind']} address with postal code {rec['postal_code']}, "
                    f"located at latitude {rec['latitude']} and longitude {rec['longitude']}.")
        if rng.random() < 0.5:
            parts = date_parts(rng)
            rec["verified_on"] = iso_date(parts)
            said = spoken_date(parts) if level >= 4 else rec["verified_on"]
            text.append(f"It was last verified on {said}.")
    if level >= 3:
        props.update(contact=obj({"name": STR, "phone": STR}),
                     delivery_days=string_set(w.WEEKDAYS))
        rec.update(contact={"name": person_name(rng), "phone": phone(rng)},
                   delivery_days=sample(rng, w.WEEKDAYS, 1, 3))
        text.append(f"Deliveries are accepted on {join(rec['delivery_days'])}; ask for "
                    f"{rec['contact']['name']} at {rec['contact']['phone']}.")
    if level >= 4:
        props["history"] = array_of(obj({"city": STR, "moved_in": fmt("date"),
                                         "reason": enum(w.MOVE_REASONS)}))
        moves = sorted(date_parts(rng, 2000) for _ in range(rng.randint(1, 2)))
        rec["history"] = [{"city": rng.choice(w.CITIES)[0], "moved_in": iso_date(parts),
                           "reason": rng.choice(w.MOVE_REASONS)} for parts in moves]
        said = [f"to {h['city']} on {spoken_date(parts)} for {h['reason']}"
                for h, parts in zip(rec["history"], moves, strict=True)]
        text.append(f"In earlier years the resident moved {', and later '.join(said)}.")
    return root(4, "Address", obj(props, optional)), rec, text


FAMILIES: dict[str, tuple[str, Callable[[random.Random, int], Built]]] = {
    "people": ("person", person),
    "orders": ("order", order),
    "events": ("event", event),
    "products": ("product", product),
    "addresses": ("address", address),
}
