"""TideMQ config-center client: the versioned KV, watches and leases (`client`, `watch`), the
one follow loop (`follow`) and what is built on it (`mirror`, `live`), and the definitions
kept there (`topics`, `groups`). Every service that talks to the config center uses this
package; it needs tidemq-shared only.
"""
