-- resign: end a node's leadership at once, if it leads, so another node
-- can take over without waiting for the lease to pass. The term stays
-- recorded, so the resigned term is fenced.
--
-- KEYS[1]  the leader hash (node, term, exp)
-- ARGV[1]  node id
-- Returns: 1 when the node led, 0 otherwise.
if redis.call('HGET', KEYS[1], 'node') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'node', '', 'exp', 0)
  return 1
end
return 0
