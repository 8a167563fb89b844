-- elect: make a node the leader until now + ttl if nobody leads or the
-- leader's lease has passed, or extend the lease of the node that leads.
-- A new leadership takes a new term from the fencing counter (INCR), so a
-- deposed leader's term is never current again.
--
-- KEYS[1]  the leader hash (node, term, exp)
-- KEYS[2]  the fencing counter
-- ARGV[1]  node id
-- ARGV[2]  now, unix ms
-- ARGV[3]  ttl, ms
-- Returns: {leader node id or "", term, lease end ms}
local l = redis.call('HMGET', KEYS[1], 'node', 'term', 'exp')
local now = tonumber(ARGV[2])
local exp = now + tonumber(ARGV[3])
if l[1] == ARGV[1] and now < tonumber(l[3]) then
  redis.call('HSET', KEYS[1], 'exp', exp)
  return {ARGV[1], tonumber(l[2]), exp}
end
if l[1] and l[1] ~= '' and now < tonumber(l[3]) then
  return {l[1], tonumber(l[2]), tonumber(l[3])}
end
local term = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'node', ARGV[1], 'term', term, 'exp', exp)
return {ARGV[1], term, exp}
