-- Shared by bench/wrk_*.lua: wrk's summary as one machine-readable line.
--
--   WRK_RESULT {"requests":..,"duration_us":..,"non2xx":..,"p50_us":..,"p99_us":.., ...}
--
-- `non2xx` is the sum of the threads' `non2xx` counters when the script counts them in
-- response() (wrk_create.lua), else wrk's own count of statuses >= 400.
local report = {}
local ffi = require("ffi")

ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clk_id, bench_timespec *tp);
]]
local CLOCK_MONOTONIC = 1
local ts = ffi.new("bench_timespec")

-- CLOCK_MONOTONIC in seconds: the instants the scripts report (comparable across threads)
function report.now()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) / 1e9
end

local threads = {}

-- setup(thread) for the scripts: numbers the threads and keeps them for done()
function report.setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end

local function thread_sum(name)
  local total, seen = 0, false
  for _, t in ipairs(threads) do
    local v = t:get(name)
    if v ~= nil then
      total, seen = total + v, true
    end
  end
  return total, seen
end

local function first_error()
  for _, t in ipairs(threads) do
    local v = t:get("first_error")
    if v ~= nil then
      return v
    end
  end
  return ""
end

local function quote(s)
  s = s:gsub('\\', '\\\\'):gsub('"', '\\"'):gsub('[%c]', ' ')
  return '"' .. s .. '"'
end

function report.done(summary, latency, requests)
  local non2xx, counted = thread_sum("non2xx")
  if not counted then
    non2xx = summary.errors.status
  end
  local e = summary.errors
  local fields = {
    string.format('"requests":%d', summary.requests),
    string.format('"duration_us":%d', summary.duration),
    string.format('"non2xx":%d', non2xx),
    string.format('"status_errors":%d', e.status),
    string.format('"connect_errors":%d', e.connect),
    string.format('"read_errors":%d', e.read),
    string.format('"write_errors":%d', e.write),
    string.format('"timeouts":%d', e.timeout),
    string.format('"min_us":%d', latency.min),
    string.format('"mean_us":%d', latency.mean),
    string.format('"max_us":%d', latency.max),
    string.format('"p50_us":%d', latency:percentile(50)),
    string.format('"p90_us":%d', latency:percentile(90)),
    string.format('"p99_us":%d', latency:percentile(99)),
    '"first_error":' .. quote(first_error()),
  }
  io.write("WRK_RESULT {" .. table.concat(fields, ",") .. "}\n")
end

return report
