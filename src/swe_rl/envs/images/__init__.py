"""Official evaluation images: pulled through a mirror and listed (``pull``), imported as env-cache entries
(``importing``)."""
