"""Lua scripts that make every config-center write atomic inside Redis itself.

Why Lua and not a lock in the service: several config-center instances serve the same Redis,
so the only place a compare-and-set, the revision counter, the key record, its history and the
event log can change together is one script run by Redis. Every script receives the same three
leading arguments (namespace, event-log retention, per-key history length) and builds its key
names from the namespace; this assumes a single Redis (not Redis Cluster).

Layout under namespace `ns`:
  ns:rev             global revision counter (gap-free: INCR only inside a write)
  ns:kv:<key>        hash value/create/mod/ver/lease of a live key
  ns:keys            sorted set of live keys (score 0) for prefix ranges via ZRANGEBYLEX
  ns:log             stream of events, entry id "<revision>-0" (one event per revision)
  ns:compact         oldest revision still in ns:log
  ns:hist:<key>      list "TYPE|rev|create|version|lease|value" of the key's last changes
  ns:histtrimmed     set of keys whose history list has lost its oldest entries (so a revision
                     before the first entry is unknown, not "the key did not exist")
  ns:leases          sorted set lease id -> deadline (ms, Redis clock)
  ns:lease:<id>      hash {ttl}; ns:lease:<id>:keys set of keys attached to the lease
  ns:lease:clock     Redis time (ms) of the last lease script: the reapers run one every
                     0.2 s, so a gap over LEASE_OUTAGE_MS is an outage (see lease_now)
"""

# No lease script for longer than this is an outage of every config center (lease_now below);
# the reapers must run more often than that (the config center refuses a longer interval).
LEASE_OUTAGE_MS = 2000

PRELUDE = r"""
local ns = ARGV[1]
local RETENTION = tonumber(ARGV[2])
local HIST_MAX = tonumber(ARGV[3])
local K_REV = ns .. ':rev'
local K_KEYS = ns .. ':keys'
local K_LOG = ns .. ':log'
local K_COMPACT = ns .. ':compact'
local K_LEASES = ns .. ':leases'
local K_TRIMMED = ns .. ':histtrimmed'
local function k_kv(key) return ns .. ':kv:' .. key end
local function k_hist(key) return ns .. ':hist:' .. key end
local function k_lease(id) return ns .. ':lease:' .. id end
local function k_lease_keys(id) return ns .. ':lease:' .. id .. ':keys' end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Leases do not age while the control plane is down. Every lease script records the time it
-- ran; the reapers of the running config centers run one every 0.2 s. A gap longer than
-- LEASE_OUTAGE_MS means no config center reached a master (a failover, a hung Redis, every
-- instance down) and so no holder could keep its lease alive: every deadline moves later by
-- the gap, as etcd resets deadlines when its leader changes. The clock is written under the
-- same replication barrier as everything else, so a promoted replica knows it.
local LEASE_OUTAGE_MS = """ + str(LEASE_OUTAGE_MS) + r"""
local function lease_now()
  local now = now_ms()
  local clock = ns .. ':lease:clock'
  local gap = now - tonumber(redis.call('GET', clock) or now)
  if gap > LEASE_OUTAGE_MS then
    local deadlines = redis.call('ZRANGE', K_LEASES, 0, -1, 'WITHSCORES')
    for i = 1, #deadlines, 2 do
      redis.call('ZADD', K_LEASES, tonumber(deadlines[i + 1]) + gap, deadlines[i])
    end
  end
  redis.call('SET', clock, now)
  return now
end

local function current_rev()
  return tonumber(redis.call('GET', K_REV) or '0')
end

local function append_event(rev, etype, key, value, create, version, lease)
  redis.call('XADD', K_LOG, rev .. '-0', 't', etype, 'k', key, 'v', value,
             'c', create, 'n', version, 'l', lease)
  local hist = k_hist(key)
  redis.call('RPUSH', hist, etype .. '|' .. rev .. '|' .. create .. '|' .. version .. '|'
             .. lease .. '|' .. value)
  if redis.call('LLEN', hist) > HIST_MAX then
    redis.call('LTRIM', hist, -HIST_MAX, -1)
    redis.call('SADD', K_TRIMMED, key)
  end
  local compact = tonumber(redis.call('GET', K_COMPACT) or '1')
  if rev - compact + 1 > RETENTION then
    compact = rev - RETENTION + 1
    redis.call('XTRIM', K_LOG, 'MINID', compact .. '-0')
    redis.call('SET', K_COMPACT, compact)
  end
end

local function delete_key(key, cur)
  local rev = redis.call('INCR', K_REV)
  redis.call('DEL', k_kv(key))
  redis.call('ZREM', K_KEYS, key)
  local lease = cur[4] or '0'
  if lease ~= '0' then redis.call('SREM', k_lease_keys(lease), key) end
  append_event(rev, 'DELETE', key, '', 0, 0, 0)
  return rev
end

local function revoke_lease(id)
  local keys = redis.call('SMEMBERS', k_lease_keys(id))
  table.sort(keys)
  local deleted = 0
  for _, key in ipairs(keys) do
    local cur = redis.call('HMGET', k_kv(key), 'mod', 'create', 'ver', 'lease')
    if cur[1] and cur[4] == id then
      delete_key(key, cur)
      deleted = deleted + 1
    end
  end
  redis.call('DEL', k_lease_keys(id), k_lease(id))
  redis.call('ZREM', K_LEASES, id)
  return deleted
end
"""

# ARGV[4..7] = key, value, expected mod revision ('' = unconditional), lease id ('0' = none).
# -> {status, revision, current_mod, prev_value, prev_create, prev_version, prev_lease}
#    status 1 = written, 0 = compare failed, -1 = lease not found/expired.
PUT = PRELUDE + r"""
local key, value, expected, lease = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local kv = k_kv(key)
local cur = redis.call('HMGET', kv, 'mod', 'create', 'ver', 'lease', 'value')
local cur_mod = tonumber(cur[1] or '0')
if expected ~= '' and tonumber(expected) ~= cur_mod then
  return {0, current_rev(), cur_mod}
end
if lease ~= '0' then
  local now = lease_now()
  local deadline = redis.call('ZSCORE', K_LEASES, lease)
  if (not deadline) or tonumber(deadline) < now then
    return {-1, current_rev(), cur_mod}
  end
end
local rev = redis.call('INCR', K_REV)
local create, version = rev, 1
if cur_mod == 0 then
  redis.call('ZADD', K_KEYS, 0, key)
else
  create = tonumber(cur[2])
  version = tonumber(cur[3]) + 1
end
local old_lease = cur[4] or '0'
if old_lease ~= lease then
  if old_lease ~= '0' then redis.call('SREM', k_lease_keys(old_lease), key) end
  if lease ~= '0' then redis.call('SADD', k_lease_keys(lease), key) end
end
redis.call('HSET', kv, 'value', value, 'mod', rev, 'create', create, 'ver', version,
           'lease', lease)
append_event(rev, 'PUT', key, value, create, version, lease)
if cur_mod == 0 then return {1, rev, 0} end
return {1, rev, cur_mod, cur[5], tonumber(cur[2]), tonumber(cur[3]), cur[4]}
"""

# ARGV[4..5] = key, expected mod revision ('' = unconditional).
# -> {status, revision, current_mod, deleted}; status 1 = done, 0 = compare failed.
DELETE = PRELUDE + r"""
local key, expected = ARGV[4], ARGV[5]
local cur = redis.call('HMGET', k_kv(key), 'mod', 'create', 'ver', 'lease')
local cur_mod = tonumber(cur[1] or '0')
if expected ~= '' and tonumber(expected) ~= cur_mod then
  return {0, current_rev(), cur_mod, 0}
end
if cur_mod == 0 then return {1, current_rev(), 0, 0} end
return {1, delete_key(key, cur), cur_mod, 1}
"""

# ARGV[4] = limit (0 = all), ARGV[5..] = prefixes.
# -> {revision, compact, count1, k,v,create,mod,ver,lease, ..., count2, ...}
RANGE = PRELUDE + r"""
local limit = tonumber(ARGV[4])
local out = {current_rev(), tonumber(redis.call('GET', K_COMPACT) or '1')}
for i = 5, #ARGV do
  local prefix = ARGV[i]
  local lo, hi = '-', '+'
  if prefix ~= '' then lo, hi = '[' .. prefix, '[' .. prefix .. '\255' end
  local keys
  if limit > 0 then
    keys = redis.call('ZRANGEBYLEX', K_KEYS, lo, hi, 'LIMIT', 0, limit)
  else
    keys = redis.call('ZRANGEBYLEX', K_KEYS, lo, hi)
  end
  out[#out + 1] = #keys
  for _, key in ipairs(keys) do
    local f = redis.call('HMGET', k_kv(key), 'value', 'create', 'mod', 'ver', 'lease')
    out[#out + 1] = key
    for j = 1, 5 do out[#out + 1] = f[j] end
  end
end
return out
"""

# Snapshot for a range at an older revision. ARGV[4] = prefix, ARGV[5] = revision R.
# -> {revision, compact, {live kvs flat (6 each)},
#     {changed key, its history list, 1 if that history was trimmed else 0, ...}}
RANGE_AT = PRELUDE + r"""
local prefix, at = ARGV[4], tonumber(ARGV[5])
local rev = current_rev()
local compact = tonumber(redis.call('GET', K_COMPACT) or '1')
if at + 1 < compact or at > rev then return {rev, compact, {}, {}} end
local lo, hi = '-', '+'
if prefix ~= '' then lo, hi = '[' .. prefix, '[' .. prefix .. '\255' end
local live = {}
for _, key in ipairs(redis.call('ZRANGEBYLEX', K_KEYS, lo, hi)) do
  local f = redis.call('HMGET', k_kv(key), 'value', 'create', 'mod', 'ver', 'lease')
  live[#live + 1] = key
  for j = 1, 5 do live[#live + 1] = f[j] end
end
local seen, changed = {}, {}
for _, entry in ipairs(redis.call('XRANGE', K_LOG, (at + 1) .. '-0', '+')) do
  local fields = entry[2]
  local key = fields[4]
  if not seen[key] and string.sub(key, 1, #prefix) == prefix then
    seen[key] = true
    changed[#changed + 1] = key
    changed[#changed + 1] = redis.call('LRANGE', k_hist(key), 0, -1)
    changed[#changed + 1] = redis.call('SISMEMBER', K_TRIMMED, key)
  end
end
return {rev, compact, live, changed}
"""

# ARGV[4..5] = ttl in ms, ttl in s -> lease id.
LEASE_GRANT = PRELUDE + r"""
local id = redis.call('INCR', ns .. ':lease:next')
redis.call('ZADD', K_LEASES, lease_now() + tonumber(ARGV[4]), id)
redis.call('HSET', k_lease(id), 'ttl', ARGV[5])
return id
"""

# ARGV[4] = lease id -> ttl seconds, 0 if the lease is gone or past its deadline.
LEASE_KEEPALIVE = PRELUDE + r"""
local id = ARGV[4]
local now = lease_now()
local deadline = redis.call('ZSCORE', K_LEASES, id)
if (not deadline) or tonumber(deadline) < now then return 0 end
local ttl = tonumber(redis.call('HGET', k_lease(id), 'ttl') or '0')
redis.call('ZADD', K_LEASES, now + ttl * 1000, id)
return ttl
"""

# ARGV[4] = lease id -> number of keys deleted, -1 if the lease does not exist.
LEASE_REVOKE = PRELUDE + r"""
local id = ARGV[4]
if not redis.call('ZSCORE', K_LEASES, id) then return -1 end
return revoke_lease(id)
"""

# ARGV[4] = max leases to reap in one run -> {leases reaped, keys deleted}.
# Idempotent: any number of config-center instances may run it concurrently.
LEASE_REAP = PRELUDE + r"""
local expired = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', lease_now(), 'LIMIT', 0,
                           tonumber(ARGV[4]))
local deleted = 0
for _, id in ipairs(expired) do deleted = deleted + revoke_lease(id) end
return {#expired, deleted}
"""

# ARGV[4] = key -> {revision, 1 if the history was trimmed else 0, {history entries}}:
# one snapshot, so a rollback sees the history and the revision it was read at together.
HISTORY = PRELUDE + r"""
local key = ARGV[4]
return {current_rev(), redis.call('SISMEMBER', K_TRIMMED, key),
        redis.call('LRANGE', k_hist(key), 0, -1)}
"""

# ARGV[4] = key -> {revision, value, create, mod, ver, lease} (fields nil when absent).
GET = PRELUDE + r"""
local f = redis.call('HMGET', k_kv(ARGV[4]), 'value', 'create', 'mod', 'ver', 'lease')
return {current_rev(), f[1], f[2], f[3], f[4], f[5]}
"""
