"""The API routers, one module per concern (info, chat, sessions); ``lovia.web.app`` mounts them."""

__all__: list[str] = []
