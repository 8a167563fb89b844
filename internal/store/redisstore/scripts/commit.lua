-- commit: apply the writes of one store transaction atomically, if nothing
-- it read has changed since (optimistic concurrency), and, for a leader
-- duty, if the writer's leadership term is still current.
--
-- Every document (task, kind, worker, schedule, token, key holder) is a
-- hash with a version field "v" (absent: version 0) and a body "d".
--
-- KEYS: every key the transaction guards or writes; ops name them by index.
-- ARGV[1]        g: number of guards
-- ARGV[2..2g+1]  g pairs (key index, version read): each key's "v" must
--                still be that version (0: the key must not exist)
-- ARGV[2g+2]     fencing term (0: unfenced)
-- ARGV[2g+3]     index of the leader key (when fenced)
-- ARGV[2g+4]     now, unix ms (when fenced)
-- then the ops, each an opcode and its operands (key operands by index):
--   P k json         put document body d, version v + 1
--   B k              bump version v + 1 (claims on a capped or rate-limited kind)
--   D k              delete key
--   H k field value  set a plain hash field (no version change)
--   M k field value  set a plain hash field to value if that is more than
--                    its number now (absent: 0); no version change
--   X k field        delete a plain hash field
--   Z k score member add to / move in a sorted set
--   R k member       remove from a sorted set
--   L k value        append to a list
--   N channel msg    publish (wake-ups)
-- Returns: "OK"; {"CONFLICT", key index} when a guard failed (nothing
-- written); {"FENCED", found, term, lease end ms} when fenced (nothing
-- written).
local g = tonumber(ARGV[1])
for i = 0, g - 1 do
  local k = KEYS[tonumber(ARGV[2 + 2 * i])]
  local want = tonumber(ARGV[3 + 2 * i])
  local v = tonumber(redis.call('HGET', k, 'v') or '0') or 0
  if v ~= want then
    return {'CONFLICT', ARGV[2 + 2 * i]}
  end
end
local p = 2 * g + 2
local term = tonumber(ARGV[p])
if term ~= 0 then
  local l = redis.call('HMGET', KEYS[tonumber(ARGV[p + 1])], 'term', 'exp')
  local now = tonumber(ARGV[p + 2])
  if not l[1] then
    return {'FENCED', 0, 0, 0}
  end
  if tonumber(l[1]) ~= term or now >= tonumber(l[2]) then
    return {'FENCED', 1, tonumber(l[1]), tonumber(l[2])}
  end
end
p = p + 3
while p <= #ARGV do
  local op = ARGV[p]
  if op == 'N' then
    redis.call('PUBLISH', ARGV[p + 1], ARGV[p + 2])
    p = p + 3
  else
    local k = KEYS[tonumber(ARGV[p + 1])]
    if op == 'P' then
      redis.call('HINCRBY', k, 'v', 1)
      redis.call('HSET', k, 'd', ARGV[p + 2])
      p = p + 3
    elseif op == 'B' then
      redis.call('HINCRBY', k, 'v', 1)
      p = p + 2
    elseif op == 'D' then
      redis.call('DEL', k)
      p = p + 2
    elseif op == 'H' then
      redis.call('HSET', k, ARGV[p + 2], ARGV[p + 3])
      p = p + 4
    elseif op == 'M' then
      local cur = tonumber(redis.call('HGET', k, ARGV[p + 2]) or '0') or 0
      if tonumber(ARGV[p + 3]) > cur then
        redis.call('HSET', k, ARGV[p + 2], ARGV[p + 3])
      end
      p = p + 4
    elseif op == 'X' then
      redis.call('HDEL', k, ARGV[p + 2])
      p = p + 3
    elseif op == 'Z' then
      redis.call('ZADD', k, ARGV[p + 2], ARGV[p + 3])
      p = p + 4
    elseif op == 'R' then
      redis.call('ZREM', k, ARGV[p + 2])
      p = p + 3
    elseif op == 'L' then
      redis.call('RPUSH', k, ARGV[p + 2])
      p = p + 3
    else
      return redis.error_reply('commit: unknown op ' .. tostring(op))
    end
  end
end
return 'OK'
