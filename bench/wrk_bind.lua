-- wrk script: bind pods PREFIX-00000 .. PREFIX-<COUNT-1> to node-<i % NODES>, each bind
-- followed by the pod's `Scheduled` Event when WITH_EVENT is 1 (the API writes the
-- scheduler makes per pod), then stop.
--
--   wrk -t2 -c8 -d600s -s bench/wrk_bind.lua URL -- PREFIX COUNT NODES WITH_EVENT THREADS
--
-- Thread t of THREADS (wrk's -t, repeated: a thread cannot count its siblings) takes the
-- pods i = t-1, t-1+THREADS, ...; once its share is sent, its free connections ask
-- GET /version (cheap, not counted) until the last answer is in. Then the thread prints
--
--   WRK_THREAD {"tid":..,"requests":..,"non2xx":..,"started":..,"finished":..,"first_error":..}
--
-- (CLOCK_MONOTONIC seconds of its first request and its last answer) and stops. wrk
-- itself runs for its -d whatever its threads do: the caller interrupts it (SIGINT) once
-- every thread has printed, and takes the rate from these lines.
local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"
package.path = here .. "?.lua;" .. package.path
local report = require("wrk_report")
local now = report.now

setup = report.setup
done = report.done

local work = {} -- the thread's requests, in order
local sent, answered = 0, 0
local started = nil
local finished = false
non2xx = 0
first_error = nil

local function bind_request(pod, node)
  local body = string.format(
    '{"apiVersion":"v1","kind":"Binding","metadata":{"name":"%s","namespace":"default"},' ..
    '"target":{"apiVersion":"v1","kind":"Node","name":"%s"}}', pod, node)
  return wrk.format("POST", "/api/v1/namespaces/default/pods/" .. pod .. "/binding",
                    {["Content-Type"] = "application/json"}, body)
end

local function event_request(pod, node)
  local body = string.format(
    '{"apiVersion":"v1","kind":"Event","metadata":{"name":"%s.bench","namespace":"default"},' ..
    '"involvedObject":{"kind":"Pod","namespace":"default","name":"%s","apiVersion":"v1"},' ..
    '"reason":"Scheduled","type":"Normal",' ..
    '"message":"Successfully assigned default/%s to %s",' ..
    '"source":{"component":"bench"},"count":1}', pod, pod, pod, node)
  return wrk.format("POST", "/api/v1/namespaces/default/events",
                    {["Content-Type"] = "application/json"}, body)
end

function init(args)
  local prefix, count, nodes = args[1], tonumber(args[2]), tonumber(args[3])
  local with_event, threads = args[4] == "1", tonumber(args[5])
  for i = tid - 1, count - 1, threads do
    local pod = string.format("%s-%05d", prefix, i)
    local node = string.format("node-%05d", i % nodes)
    table.insert(work, bind_request(pod, node))
    if with_event then
      table.insert(work, event_request(pod, node))
    end
  end
  filler = wrk.format("GET", "/version")
end

function request()
  started = started or now()
  sent = sent + 1
  return work[sent] or filler
end

function response(status, headers, body)
  answered = answered + 1
  -- past #work: a filler's answer (or one that overtook the last binds' answers)
  if answered <= #work and (status < 200 or status > 299) then
    non2xx = non2xx + 1
    if first_error == nil then
      first_error = tostring(status) .. " " .. (body or ""):sub(1, 300)
    end
  end
  if answered >= #work and not finished then
    finished = true
    local err = (first_error or ""):gsub('\\', '\\\\'):gsub('"', '\\"'):gsub('[%c]', ' ')
    io.write(string.format(
      'WRK_THREAD {"tid":%d,"requests":%d,"non2xx":%d,"started":%.6f,"finished":%.6f,' ..
      '"first_error":"%s"}\n', tid, #work, non2xx, started or now(), now(), err))
    io.stdout:flush()
    wrk.thread:stop()
  end
end
