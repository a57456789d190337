"""Every request and response class we speak, one module per area, re-exported here by name."""

from .acls import *  # noqa: F401,F403
from .admin import *  # noqa: F401,F403
from .fetch import *  # noqa: F401,F403
from .groups import *  # noqa: F401,F403
from .handshake import *  # noqa: F401,F403
from .metadata import *  # noqa: F401,F403
from .offsets import *  # noqa: F401,F403
from .partition_admin import *  # noqa: F401,F403
from .produce import *  # noqa: F401,F403
from .quotas import *  # noqa: F401,F403
from .share import *  # noqa: F401,F403
from .share_state import *  # noqa: F401,F403
from .transactions import *  # noqa: F401,F403
