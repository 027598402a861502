"""Default addresses. A module of constants alone, so the `tidemq` command can show them in
--help without importing the clients that use them."""

DEFAULT_CONFIG_CENTER = "127.0.0.1:7070,127.0.0.1:7071"  # both config centers of `make up`
