"""Wire encoders: event-log records to frames of one wire format (pure functions)."""

__all__: list[str] = []
