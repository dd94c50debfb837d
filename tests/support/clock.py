"""A clock tests move by hand (the store, the breaker and the rate limit take a `clock` callable)."""


class FakeClock:
    def __init__(self, now: float = 1_800_000_010.0) -> None:
        self.now = now  # by default 10 s into a 60 s window

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
