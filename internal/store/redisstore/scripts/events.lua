-- events: append events to the event log with consecutive ids, in order.
-- The first id of a new log is its creation time in unix microseconds.
--
-- KEYS[1]  the last-id counter
-- KEYS[2]  the log: a sorted set scored by id, members "id:unix ms:json"
-- ARGV[1]  the first id minus one, should the log be new
-- ARGV[2]  notification channel ("" for none)
-- ARGV[3]  notification message
-- ARGV[4..] (unix ms, json) pairs, one per event
-- Returns: the id of the last event appended.
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SET', KEYS[1], ARGV[1])
end
local id = 0
for i = 4, #ARGV, 2 do
  id = redis.call('INCR', KEYS[1])
  redis.call('ZADD', KEYS[2], id, string.format('%.0f', id) .. ':' .. ARGV[i] .. ':' .. ARGV[i + 1])
end
if ARGV[2] ~= '' then
  redis.call('PUBLISH', ARGV[2], ARGV[3])
end
return id
