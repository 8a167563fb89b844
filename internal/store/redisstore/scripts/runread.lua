-- runread: read, in one round trip, what a heartbeat or a report needs:
-- the task record of a run (found through the run → task hash) and,
-- optionally, the worker's record. It writes nothing. (The task key is
-- computed from the run: a standalone Redis, not Redis Cluster.)
--
-- KEYS[1]  the run → task hash
-- KEYS[2]  the worker's hash, or "" for none
-- ARGV[1]  run id
-- ARGV[2]  prefix of task keys ("<prefix>t:")
-- Returns: {task id or false, task version, task body,
--           worker version, worker body, worker seen, worker wait}
local id = redis.call('HGET', KEYS[1], ARGV[1])
local out = {id, false, false, false, false, false, false}
if id then
  local t = redis.call('HMGET', ARGV[2] .. id, 'v', 'd')
  out[2], out[3] = t[1], t[2]
end
if KEYS[2] ~= '' then
  local w = redis.call('HMGET', KEYS[2], 'v', 'd', 'seen', 'wait')
  out[4], out[5], out[6], out[7] = w[1], w[2], w[3], w[4]
end
return out
