"""Ray's token authentication, told apart from a cluster that is not there.

A local ``ray.init()`` turns token authentication on and writes ``~/.ray/auth_token``; a
``ray start --head`` on that machine then finds the file and requires the token. A process that
joins with an explicit ``HOST:PORT`` does not send it unless ``RAY_AUTH_MODE=token`` is set
(Ray enables it by itself only for ``auto``), and ``ray.init`` then fails after 20 s with
"Failed to connect". ``auth_problem`` asks the head's GCS once, in the mode ``ray.init`` will
use, and says which of the three cases it is and what fixes it.
"""

from __future__ import annotations

import subprocess
import sys

#: A head that answers TCP but not as a GCS makes the client wait 40 s: past this, the check
#: gives up and lets ``ray.init`` report what it finds.
CHECK_TIMEOUT_S = 15.0
# Run in a child process: a GCS client made in the caller (from a thread, to bound the wait)
# leaves Ray's state there such that the actors of the ray.init that follows die at birth, and
# the child's stderr takes Ray's C++ log of the refusal, which our one line replaces.
_CHECK = """
import sys
from ray._raylet import (AuthenticationMode, AuthenticationTokenLoader, GcsClient,
                         get_authentication_mode)
from ray.exceptions import AuthenticationError
token_mode = get_authentication_mode() == AuthenticationMode.TOKEN
has_token = AuthenticationTokenLoader.instance().has_token(ignore_auth_mode=True)
print(int(token_mode), int(has_token), flush=True)
if token_mode and not has_token:  # Ray's client would abort the process
    sys.exit()
try:
    GcsClient(address=sys.argv[1]).internal_kv_get(b"grpo-gym-auth-check", None, timeout=5)
    print("ok")
except AuthenticationError:
    print("refused")
"""


def auth_problem(address: str, timeout: float = CHECK_TIMEOUT_S) -> str | None:
    """Why the head at ``address`` (``HOST:PORT``) refuses this process, in one line with the
    fix; ``None`` when it accepts it, or when the check cannot tell (``ray.init`` then tries)."""
    if address == "auto" or address.startswith("ray://"):
        return None  # auto sends a local token by itself; Ray Client authenticates elsewhere
    try:
        out = subprocess.run([sys.executable, "-c", _CHECK, address], capture_output=True,
                             text=True, timeout=timeout).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return None
    if len(out) < 2:
        return None
    token_mode, has_token = out[0] == "1", out[1] == "1"
    if token_mode and not has_token:
        return ("RAY_AUTH_MODE=token is set, but this machine has no Ray token: copy the head "
                "node's ~/.ray/auth_token here (or set RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH)")
    if out[2:] == ["refused"]:
        return refusal(address, token_mode=token_mode, has_token=has_token)
    return None


def refusal(address: str, token_mode: bool, has_token: bool) -> str:
    """The line for a head that refused this process: why, and the fix for that case."""
    head = f"the Ray cluster at {address} requires token authentication"
    if token_mode:
        return (f"{head} and refused this machine's token: use the head node's token (copy "
                f"its ~/.ray/auth_token here, or set RAY_AUTH_TOKEN)")
    if has_token:
        return (f"{head}, and Ray sends this machine's token to an explicit address only with "
                "RAY_AUTH_MODE=token: set RAY_AUTH_MODE=token (or, on a node of the cluster, "
                "pass --ray-address auto)")
    return (f"{head}, and this machine has no token: copy the head node's ~/.ray/auth_token "
            "here (or set RAY_AUTH_TOKEN) and set RAY_AUTH_MODE=token")
