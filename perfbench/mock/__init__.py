"""The simulated agent: profiles (``profile.py``) shared by the in-process mock target and the
mock HTTP server."""
