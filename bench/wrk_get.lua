-- wrk script: plain GETs of wrk's URL (headers from -H), reported by wrk_report.lua.
--
--   wrk -t1 -c1 -d3s -s bench/wrk_get.lua URL
local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"
package.path = here .. "?.lua;" .. package.path
local report = require("wrk_report")

setup = report.setup
done = report.done
