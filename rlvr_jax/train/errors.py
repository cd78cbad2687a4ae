"""`ConfigError` and `user_input`: the errors a user can fix, naming the field at fault
(raised by `validate`, the builders, the workdir and checkpoint code)."""
import contextlib
from typing import Iterator


class ConfigError(ValueError):
    """A config, file, data or workdir problem the user can fix; the message names it."""


@contextlib.contextmanager
def user_input(where: str) -> Iterator[None]:
    """Re-raises a ValueError / OSError of the block as `ConfigError("<where>: <message>")`.

    `where` is the config field (or file) the block reads, e.g. "data.path".
    """
    try:
        yield
    except ConfigError:
        raise
    except (ValueError, OSError, KeyError, TypeError) as e:
        message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if message.startswith((f"{where}.", f"{where}:")):  # Already names its field.
            raise ConfigError(message) from e
        raise ConfigError(f"{where}: {message}") from e
