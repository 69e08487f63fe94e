-- deliveries.lua - wrk script of the HTTP benchmark (bench/http/run.sh): each
-- of wrk's threads sends its share of the pre-signed deliveries (bench/http/
-- sign.js: line i goes to thread i mod threads), in order, cycling if the run
-- outlasts the file; it records the event id of every 2xx answer (the answer
-- bodies carry "event_id"), so that losses can be counted afterwards.
-- Usage: wrk ... -s deliveries.lua URL -- DELIVERIES THREADS OUT_PREFIX
-- done() writes OUT_PREFIX.json (the run's numbers) and OUT_PREFIX.ids.
local threads, counter = {}, 0

function setup(thread)
  counter = counter + 1
  thread:set("tid", counter - 1)
  table.insert(threads, thread)
end

function init(args)
  local file, nthreads = args[1], tonumber(args[2])
  out_prefix = args[3]
  reqs, answered, sent, codes = {}, {}, 0, {}
  local i = 0
  for line in io.lines(file) do
    if i % nthreads == tid then
      local sig, body = line:match("^([^\t]*)\t(.*)$")
      reqs[#reqs + 1] = wrk.format("POST", nil, {
        ["Content-Type"] = "application/json; charset=utf-8",
        ["User-Agent"] = "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
        ["Stripe-Signature"] = sig }, body)
    end
    i = i + 1
  end
  nreqs = #reqs
end

function request()
  sent = sent + 1
  return reqs[(sent - 1) % #reqs + 1]
end

function response(status, headers, body)
  codes[status] = (codes[status] or 0) + 1
  if status >= 200 and status < 300 then
    local id = body:match('"event_id":"([^"]+)"')
    if id then answered[#answered + 1] = id end
  end
end

function done(summary, latency, requests)
  local prefix = threads[1]:get("out_prefix")
  local ids = io.open(prefix .. ".ids", "w")
  local sent_total, file_total, codes_total = 0, 0, {}
  for _, t in ipairs(threads) do
    for _, id in ipairs(t:get("answered")) do ids:write(id, "\n") end
    sent_total = sent_total + t:get("sent")
    file_total = file_total + t:get("nreqs")
    for code, n in pairs(t:get("codes")) do codes_total[code] = (codes_total[code] or 0) + n end
  end
  ids:close()
  local parts = {}
  for code, n in pairs(codes_total) do parts[#parts + 1] = string.format('"%d":%d', code, n) end
  local e = summary.errors
  local f = io.open(prefix .. ".json", "w")
  f:write(string.format(
    '{"requests":%d,"duration_s":%.3f,"rps":%.1f,"p50_ms":%.2f,"p99_ms":%.2f,"max_ms":%.2f,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},"codes":{%s},' ..
    '"sent":%d,"in_file":%d,"cycled":%s}\n',
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    e.connect, e.read, e.write, e.status, e.timeout, table.concat(parts, ","),
    sent_total, file_total, tostring(sent_total > file_total)))
  f:close()
end
