-- wrk script: POST a pod body with a unique name per request.
--
--   wrk -t2 -c32 -d10s -s bench/wrk_create.lua URL -- TEMPLATE PREFIX [RATE_PER_THREAD]
--
-- TEMPLATE is a file holding the JSON body with the placeholder __NAME__, replaced by
-- PREFIX-<thread>-<counter> (unique without generateName, so the bare endpoint gets the
-- same bodies). RATE_PER_THREAD > 0 paces each thread to that many requests/s with
-- delay() (wrk2 is not in Debian); 0 or absent: as fast as the connections go.
-- Responses that are not 2xx are counted (and the first one kept) for the report.
local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"
package.path = here .. "?.lua;" .. package.path
local report = require("wrk_report")
local now = report.now

setup = report.setup
done = report.done

local template, prefix, interval, next_at
local counter = 0
non2xx = 0
first_error = nil

function init(args)
  local f = assert(io.open(args[1], "r"))
  template = f:read("*a")
  f:close()
  prefix = (args[2] or "p") .. "-" .. tostring(tid) .. "-"
  local rate = tonumber(args[3] or "0")
  interval = rate > 0 and 1 / rate or nil
  if interval == nil then
    delay = nil -- unpaced: wrk then sends the next request as soon as a response is in
  end
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  counter = counter + 1
  local body = template:gsub("__NAME__", prefix .. counter, 1)
  return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
    if first_error == nil then
      first_error = tostring(status) .. " " .. (body or ""):sub(1, 300)
    end
  end
end

-- paced mode: the request of slot k goes out at start + k * interval (open loop while
-- connections are free; a thread that fell more than 1 s behind starts over from now)
function delay()
  local t = now()
  if next_at == nil or next_at < t - 1 then
    next_at = t
  end
  local slot = next_at
  next_at = next_at + interval
  return math.max(0, (slot - t) * 1000)
end
