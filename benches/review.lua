-- wrk script: POST /mutate with a real AdmissionReview, a fresh request uid every time (the uid
-- is the in-flight ledger id), and a summary line of the latency percentiles.
--
-- Environment: BODY_FILE (the review; its uid must be "3f2a9c01-b7de-4c55-9e1a-0d4b6f8e2c17"),
-- DELAY_MS (optional pause before each request, per connection, for a steady rate),
-- SAME_UID=1 (send the body as it is: one uid, so only the first review charges the ledger),
-- JOB_SIZE=N (optional: every N reviews of a thread belong to a new job, its "wordcount" in
-- labels, owner and anti-affinity selector renamed alike, as a cluster that runs many jobs sees).

local UID = "3f2a9c01%-b7de%-4c55%-9e1a%-0d4b6f8e2c17"
local threads = {}
local thread_count = 0

function setup(thread)
  thread_count = thread_count + 1
  thread:set("thread_id", thread_count)
  table.insert(threads, thread)
end

function init(args)
  local path = os.getenv("BODY_FILE")
  local f = path and io.open(path, "rb")
  if not f then
    error("BODY_FILE must name a readable AdmissionReview JSON file")
  end
  local text = f:read("*a")
  f:close()
  local at = text:find(UID)
  if not at then
    error("BODY_FILE must carry the uid 3f2a9c01-b7de-4c55-9e1a-0d4b6f8e2c17")
  end
  -- Split once; each request only concatenates.
  before = text:sub(1, at - 1)
  after = text:sub(at + 36)
  counter = 0
  same_uid = os.getenv("SAME_UID") == "1"
  whole = text
  delay_ms = tonumber(os.getenv("DELAY_MS") or "0") or 0
  job_size = tonumber(os.getenv("JOB_SIZE") or "0") or 0
  job = -1
  job_before, job_after = before, after
  wrk.method = "POST"
  wrk.path = "/mutate?timeout=10s"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["User-Agent"] = "kube-apiserver-admission"
end

function request()
  if same_uid then
    return wrk.format(nil, nil, nil, whole)
  end
  counter = counter + 1
  -- The first 16 alphanumerics become the ledger id: thread (4 hex) + counter (12 hex).
  local hi = math.floor(counter / 65536)
  local lo = counter % 65536
  local uid = string.format("%04x%04x-%04x-4c55-9e1a-0d4b6f8e2c17", thread_id, hi % 65536, lo)
  if job_size > 0 then
    local now = math.floor((counter - 1) / job_size)
    if now ~= job then
      -- As long as "wordcount": the body's other offsets do not move.
      job = now
      local name = string.format("w%x%07d", thread_id % 16, job % 10000000)
      job_before = before:gsub("wordcount", name)
      job_after = after:gsub("wordcount", name)
    end
    return wrk.format(nil, nil, nil, job_before .. uid .. job_after)
  end
  return wrk.format(nil, nil, nil, before .. uid .. after)
end

if (tonumber(os.getenv("DELAY_MS") or "0") or 0) > 0 then
  function delay()
    return delay_ms
  end
end

function done(summary, latency, requests)
  local errors = summary.errors
  local socket_errors = errors.connect + errors.read + errors.write + errors.timeout
  local seconds = summary.duration / 1e6
  io.write(string.format(
    "RESULT requests=%d seconds=%.2f rps=%.1f p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f non2xx=%d socket_errors=%d\n",
    summary.requests, seconds, summary.requests / seconds,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    latency:percentile(99.9) / 1000, latency.max / 1000,
    errors.status, socket_errors))
end
