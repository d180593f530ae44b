"""Failed sign-ins per client address, in a bounded window: the sign-in form is no fast oracle
for guessing tokens.

An address that failed ``limit`` sign-ins within ``window_s`` seconds is refused (E114, HTTP
429 with ``Retry-After``) until its oldest failure leaves the window, whatever token it sends
meanwhile: a refused try is not checked, so the right token, found by guessing, cannot be
recognised while the address is refused. A good sign-in clears nothing: a holder of a read
token who keeps signing in must not earn more guesses at an admin one.

The counts live in the API process (no Redis or database round trip on a form post, and a
sign-in works while Redis is down); behind a balancer each process counts on its own, so an
address gets at most ``limit`` failures a window from each. Memory is bounded twice: at most
``limit`` times per address, and at most :data:`MAX_ADDRESSES` addresses, the one whose last
failure is oldest forgotten first. The address is the one uvicorn gives (a proxy's
``X-Forwarded-For`` where it trusts the proxy: ``FORWARDED_ALLOW_IPS``).
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from errors import SignInThrottled

#: Addresses remembered at once; one that failed long ago is forgotten first.
MAX_ADDRESSES = 10_000


class SignInThrottle:
    """The failures of the last ``window_s`` seconds, per client address."""

    def __init__(
        self,
        limit: int,
        window_s: float,
        *,
        max_addresses: int = MAX_ADDRESSES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window_s = window_s
        self.max_addresses = max_addresses
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, address: str) -> None:
        """:class:`SignInThrottled` when ``address`` may not try now, saying for how long."""
        with self._lock:
            times = self._failures.get(address)
            if times is None or len(times) < self.limit:
                return
            wait_s = times[0] + self.window_s - self._clock()
        if wait_s > 0:
            seconds = math.ceil(wait_s)
            raise SignInThrottled(
                f"{self.limit} sign-ins with a wrong token came from this address within "
                f"{self.window_s:g} s; try again in {seconds} s",
                retry_after=seconds,
            )

    def failed(self, address: str) -> None:
        """Count one failed sign-in from ``address``."""
        with self._lock:
            times = self._failures.pop(address, None)
            if times is None:
                times = deque(maxlen=self.limit)
            times.append(self._clock())
            self._failures[address] = times  # the newest failure last: forgotten last
            while len(self._failures) > self.max_addresses:
                self._failures.popitem(last=False)
