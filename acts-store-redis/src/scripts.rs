//! The two Lua scripts that make batches and scans atomic on the server.
//!
//! `KEYS[1]` is the namespace's index (a sorted set of keys); `ARGV[1]` is
//! the prefix of the namespace's value keys. Both scripts only touch keys of
//! one namespace, which share a cluster hash tag.

use std::sync::OnceLock;

use redis::Script;

/// Applies a batch if its conditions hold: `ARGV[2]` is the number of
/// conditions, then one triple `kind, key, value` each (kind `e`: the key
/// holds the value; `a`: the key is absent, value ignored), then the ops as
/// triples `op, key, value` with op `p` (put) or `d` (delete, value
/// ignored). Returns -1, having written nothing, when a condition does not
/// hold; else the number of ops. Checks the index's type before writing
/// anything, so a damaged namespace applies nothing.
const BATCH: &str = r#"
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'zset' and t ~= 'none' then
  return redis.error_reply('ACTSCORRUPT the key index ' .. KEYS[1] .. ' holds a ' .. t .. ', not a sorted set')
end
local prefix = ARGV[1]
local i = 3
for c = 1, tonumber(ARGV[2]) do
  local current = redis.call('GET', prefix .. ARGV[i + 1])
  if ARGV[i] == 'a' then
    if current ~= false then return -1 end
  elseif current ~= ARGV[i + 2] then
    return -1
  end
  i = i + 3
end
local applied = 0
while i <= #ARGV do
  local key = ARGV[i + 1]
  if ARGV[i] == 'p' then
    redis.call('SET', prefix .. key, ARGV[i + 2])
    redis.call('ZADD', KEYS[1], 0, key)
  else
    redis.call('DEL', prefix .. key)
    redis.call('ZREM', KEYS[1], key)
  end
  applied = applied + 1
  i = i + 3
end
return applied
"#;

/// Scans: `ARGV[2]`/`ARGV[3]` are `ZRANGEBYLEX` min/max, `ARGV[4]` the limit
/// (-1: none), `ARGV[5]` `1` for descending. Returns `key, value, key, ...`.
const SCAN: &str = r#"
local keys
if ARGV[5] == '1' then
  keys = redis.call('ZREVRANGEBYLEX', KEYS[1], ARGV[3], ARGV[2], 'LIMIT', 0, ARGV[4])
else
  keys = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[2], ARGV[3], 'LIMIT', 0, ARGV[4])
end
local out = {}
for _, key in ipairs(keys) do
  local value = redis.call('GET', ARGV[1] .. key)
  if value == false then
    return redis.error_reply('ACTSCORRUPT the key index names a key with no value')
  end
  out[#out + 1] = key
  out[#out + 1] = value
end
return out
"#;

pub(crate) fn batch() -> &'static Script {
    static SCRIPT: OnceLock<Script> = OnceLock::new();
    SCRIPT.get_or_init(|| Script::new(BATCH))
}

pub(crate) fn scan() -> &'static Script {
    static SCRIPT: OnceLock<Script> = OnceLock::new();
    SCRIPT.get_or_init(|| Script::new(SCAN))
}
