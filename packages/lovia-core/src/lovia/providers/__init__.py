"""Provider adapters and the ``Provider`` seam (``lovia.providers.base``)."""
