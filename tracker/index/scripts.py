"""The Lua scripts `RedisIndex` runs in Redis/Valkey, each on the keys of one shard (one
hash slot). A block is a string of fixed-size records (see `tracker.index.redis_index`)."""

# Helpers of every script. KEYS[1] is the shard's hash; ARGV[1] the layout, ARGV[2] the key
# bytes per record. Lua numbers are doubles: exact for the 32-bit values used here.
_COMMON = r"""
local KL = tonumber(ARGV[2])
local ID = KL + 4  -- bytes that name a posting: its key and master id
local R = ID + 1  -- a record: those, then the posting's place
local MIN_LEVEL = 8
local floor = math.floor

local function state()  -- level, split; or nil and the other layout found
  local s = redis.call('HMGET', KEYS[1], 'layout', 'level', 'split')
  if s[1] and s[1] ~= ARGV[1] then return nil, s[1] end
  return tonumber(s[2]) or MIN_LEVEL, tonumber(s[3]) or 0
end

-- The state, when it is the one the caller routed its records with (ARGV[3], ARGV[4]);
-- else nil and the reply: the layout error, or {-1, level, split} to route them again.
local function routed_state()
  local level, split = state()
  if not level then return nil, redis.error_reply('CTLAYOUT ' .. split) end
  if level ~= tonumber(ARGV[3]) or split ~= tonumber(ARGV[4]) then
    return nil, {-1, level, split}
  end
  return level, split
end

-- The reply of a call that added postings and new blocks, once the shard counts them.
-- Every change of a shard's blocks counts one more write, under a stamp of the shard's
-- creation (a cleared index starts again from 0): readers keep blocks by both.
local function wrote()
  if redis.call('HEXISTS', KEYS[1], 'born') == 0 then
    local t = redis.call('TIME')
    redis.call('HSET', KEYS[1], 'born', t[1] .. '.' .. t[2])
  end
  redis.call('HINCRBY', KEYS[1], 'writes', 1)
end

local function added_reply(added, blocks)
  if added > 0 then
    redis.call('HINCRBY', KEYS[1], 'postings', added)
    wrote()
  end
  if blocks > 0 then redis.call('HINCRBY', KEYS[1], 'blocks', blocks) end
  redis.call('HSETNX', KEYS[1], 'layout', ARGV[1])
  return {added}
end

local function block_of(low, level, split)  -- linear hashing on the low 32 bits of h
  local b = low % 2 ^ level
  if b < split then b = low % 2 ^ (level + 1) end
  return b
end

-- Block numbers are below 2**32: 10 digits, so callers can send names as a fixed-width blob.
local function block_key(b) return KEYS[1] .. ':' .. string.format('%010d', b) end

local function u32(s, i)
  local a, b, c, d = string.byte(s, i, i + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

-- Byte offset (1-based) of the first record of block s that starts with k (a posting's
-- ID bytes), from offset init on; nil if none. A plain find runs in C; a hit not on a
-- record boundary is skipped.
local function find(s, k, init)
  local at = string.find(s, k, init, true)
  while at and (at - 1) % R ~= 0 do at = string.find(s, k, at + 1, true) end
  return at
end

-- ARGV[3]: records of 4 bytes (low 32 bits of h) then ID bytes (key, id). Returns the
-- blocks in first-seen order and their postings' ID bytes.
local function grouped(level, split)
  local blob, A = ARGV[3], 4 + ID
  local groups, order = {}, {}
  for i = 1, #blob, A do
    local b = block_of(u32(blob, i), level, split)
    local g = groups[b]
    if not g then
      g = {}
      groups[b] = g
      order[#order + 1] = b
    end
    g[#g + 1] = string.sub(blob, i + 4, i + 3 + ID)
  end
  return order, groups
end
"""

# ARGV: layout, key length, the shard's level and split the caller computed blocks with,
# the blocks (10-digit numbers, one string), then the records (one string): 2 bytes (index
# of the block), the key, the id and the place, sorted by block (then key and id: a
# repeated posting is adjacent; a posting already in its block keeps its place). Returns
# {postings added}, or {-1, level, split} when the shard has split since the caller read
# them (it retries).
# Blocks are split afterwards by SPLIT_SCRIPT, so the calls of one batch share a state.
ADD_SCRIPT = (
    _COMMON
    + r"""
local level, split = routed_state()
if not level then return split end
local numbers, blob, A = ARGV[5], ARGV[6], 2 + R
local prefix = KEYS[1] .. ':'
local added, blocks, i, n = 0, 0, 1, #ARGV[6]
while i <= n do
  local hi, lo = string.byte(blob, i, i + 1)
  local b = hi * 256 + lo
  local key = prefix .. string.sub(numbers, b * 10 + 1, b * 10 + 10)
  local old = redis.call('GET', key) or ''
  if #old == 0 then blocks = blocks + 1 end
  -- New records are appended: a block is a set, and its order does not matter.
  local new, prev = {}, nil
  while i <= n do
    local h2, l2 = string.byte(blob, i, i + 1)
    if h2 * 256 + l2 ~= b then break end
    local rec = string.sub(blob, i + 2, i + 1 + R)
    local id = string.sub(rec, 1, ID)
    if id ~= prev and not find(old, id, 1) then new[#new + 1] = rec end
    prev = id
    i = i + A
  end
  if #new > 0 then
    -- SET, not APPEND: an appended string keeps spare room, ~2x the memory.
    redis.call('SET', key, old .. table.concat(new))
    added = added + #new
  end
end
return added_reply(added, blocks)
"""
)

# The add of masters whose ids are new (no posting of theirs can be in a block yet): ARGV
# as ADD_SCRIPT's, but the records are key, id and place only, each block's in one run, and
# ARGV[7] holds the run lengths (2 bytes each, one per block): a block costs one GET and one
# SET, whatever its records.
APPEND_SCRIPT = (
    _COMMON
    + r"""
local level, split = routed_state()
if not level then return split end
local numbers, blob, runs = ARGV[5], ARGV[6], ARGV[7]
local prefix = KEYS[1] .. ':'
local blocks, at = 0, 1
for j = 0, #runs / 2 - 1 do
  local hi, lo = string.byte(runs, 2 * j + 1, 2 * j + 2)
  local size = (hi * 256 + lo) * R
  local key = prefix .. string.sub(numbers, j * 10 + 1, j * 10 + 10)
  local old = redis.call('GET', key)
  if not old then blocks = blocks + 1 end
  -- SET, not APPEND: an appended string keeps spare room, ~2x the memory.
  redis.call('SET', key, (old or '') .. string.sub(blob, at, at + size - 1))
  at = at + size
end
local added = #blob / R
return added_reply(added, blocks)
"""
)

# ARGV: layout, key length, load, highest level, postings about to come. Splits blocks
# while the shard holds (or is about to hold) more than `load` postings per block (linear
# hashing: block `split` into itself and split + 2**level, by bit `level` of h); returns
# {level, split}.
SPLIT_SCRIPT = (
    _COMMON
    + r"""
local level, split = state()
if not level then return redis.error_reply('CTLAYOUT ' .. split) end
local postings = (tonumber(redis.call('HGET', KEYS[1], 'postings')) or 0) + tonumber(ARGV[5])
local blocks = tonumber(redis.call('HGET', KEYS[1], 'blocks')) or 0
local load, top = tonumber(ARGV[3]), tonumber(ARGV[4])
local moved = false
while postings > load * (2 ^ level + split) and level < top do
  moved = true
  -- Records whose bit `level` of h is set move to block split + 2**level.
  local s = redis.call('GET', block_key(split))
  if s then
    -- Bit `level` of h is bit (level - MIN_LEVEL) of the key: in its byte `at` of a
    -- record. Runs of records going the same way are copied in one piece.
    local shift = level - MIN_LEVEL
    local at, bit = KL - floor(shift / 8), 2 ^ (shift % 8)
    local stay, move, count = {}, {}, #s / R
    local first, side = 0, nil
    for r = 0, count do
      local goes = nil
      if r < count then goes = floor(string.byte(s, r * R + at) / bit) % 2 == 1 end
      if goes ~= side then
        if side ~= nil then
          local out = side and move or stay
          out[#out + 1] = string.sub(s, first * R + 1, r * R)
        end
        first, side = r, goes
      end
    end
    if #move > 0 then
      redis.call('SET', block_key(split + 2 ^ level), table.concat(move))
      if #stay > 0 then
        redis.call('SET', block_key(split), table.concat(stay))
        blocks = blocks + 1
      else
        redis.call('DEL', block_key(split))
      end
    end
  end
  split = split + 1
  if split == 2 ^ level then
    level = level + 1
    split = 0
  end
end
if moved then
  redis.call('HSET', KEYS[1], 'layout', ARGV[1], 'level', level, 'split', split, 'blocks', blocks)
  wrote()
end
return {level, split}
"""
)

# ARGV: layout, key length, postings as _COMMON's grouped() reads them. Returns the
# postings removed (whatever their place).
REMOVE_SCRIPT = (
    _COMMON
    + r"""
local level, split = state()
if not level then return redis.error_reply('CTLAYOUT ' .. split) end
local order, groups = grouped(level, split)
local removed, blocks = 0, 0
for _, b in ipairs(order) do
  local key = block_key(b)
  local old = redis.call('GET', key)
  if old then
    local s, before = old, removed
    for _, id in ipairs(groups[b]) do
      local at = find(s, id, 1)
      if at then
        s = string.sub(s, 1, at - 1) .. string.sub(s, at + R)
        removed = removed + 1
      end
    end
    if removed > before then
      if #s == 0 then
        redis.call('DEL', key)
        blocks = blocks - 1
      else
        redis.call('SET', key, s)
      end
    end
  end
end
if removed > 0 then
  redis.call('HINCRBY', KEYS[1], 'postings', -removed)
  wrote()
end
if blocks ~= 0 then redis.call('HINCRBY', KEYS[1], 'blocks', blocks) end
return removed
"""
)

# ARGV: layout, key length, the first block number, how many blocks at most. Counts the
# blocks of the shard from that one on (below 2**level + split) that exist: an empty block
# is deleted, so every block counted holds postings, and a block deleted or evicted while
# the shard's counters stay shows as one fewer. Read only; a call looks at a slice of the
# blocks so the server answers others in between. Returns {born, writes, blocks counted,
# blocks of the shard, blocks found}: the caller sums the slices read under one (born,
# writes). (EXISTS of 500 names at once: 0.9 us a block, STRLEN of each 2.9.)
COUNT_SCRIPT = (
    _COMMON
    + r"""
local s = redis.call('HMGET', KEYS[1], 'layout', 'level', 'split', 'blocks', 'born', 'writes')
if s[1] and s[1] ~= ARGV[1] then return redis.error_reply('CTLAYOUT ' .. s[1]) end
local size = 2 ^ (tonumber(s[2]) or MIN_LEVEL) + (tonumber(s[3]) or 0)
local first = tonumber(ARGV[3])
local last = math.min(size, first + tonumber(ARGV[4])) - 1
local found, names = 0, {}
for b = first, last do
  names[#names + 1] = block_key(b)
  if #names == 500 or b == last then
    found = found + redis.call('EXISTS', unpack(names))
    names = {}
  end
end
return {s[5] or '', tonumber(s[6]) or 0, tonumber(s[4]) or 0, size, found}
"""
)

# KEYS[1]: the index's meta hash. ARGV: now, seconds. Whether no process checked the
# blocks within the last ARGV[2] seconds (1, and this one is noted as checking), or 0.
BLOCK_CHECK_DUE_SCRIPT = r"""
local now = tonumber(ARGV[1])
if now < (tonumber(redis.call('HGET', KEYS[1], 'blocks_checked_until')) or 0) then return 0 end
redis.call('HSET', KEYS[1], 'blocks_checked_until', tostring(now + tonumber(ARGV[2])))
return 1
"""
