# Shared by simultaneous.sh and alternate.sh; sourced after `work` (a
# scratch directory) and `journals` are set. Writes the two wrk scripts
# into $work and defines `start`.
#
# append.lua: single-fact appends with unique operation IDs; head.lua: the
# journal `head`; each request to a journal drawn at random from the file
# named by $SPACE.
cat >"$work/append.lua" <<'LUA'
local spaces = {}
for line in io.lines(os.getenv("SPACE")) do spaces[#spaces + 1] = line end
wrk.method = "POST"
wrk.headers["content-type"] = "application/json"
local n, tag = 0, tostring(os.time()) .. tostring(math.random(1000000))
request = function()
  n = n + 1
  return wrk.format(nil, "/v1/append", nil, '{"space":' .. spaces[math.random(#spaces)] ..
    ',"facts":["gmViZW5jaAA="],"operation_id":"s' .. tag .. '-' .. n .. '"}')
end
LUA
cat >"$work/head.lua" <<'LUA'
local spaces = {}
for line in io.lines(os.getenv("SPACE")) do spaces[#spaces + 1] = line end
wrk.method = "POST"
wrk.headers["content-type"] = "application/json"
request = function()
  return wrk.format(nil, "/v1/head", nil, '{"space":' .. spaces[math.random(#spaces)] .. '}')
end
LUA

# start NAME LABD PORT: labd on PORT..PORT+5; `journals` journals under
# the root, one line each in its `space` file.
start() {
  local name=$1 labd=$2 port=$3 dir=$work/$1
  rm -rf "$dir" && mkdir -p "$dir"
  "$labd" --data-dir "$dir/data" --log warn --ready-file "$dir/ready" \
    --bytes-listen 127.0.0.1:$port --bytes-management-listen 127.0.0.1:$((port + 1)) \
    --journal-listen 127.0.0.1:$((port + 2)) --journal-management-listen 127.0.0.1:$((port + 3)) \
    --coord-listen 127.0.0.1:$((port + 4)) --coord-management-listen 127.0.0.1:$((port + 5)) \
    >"$dir/log" 2>&1 &
  echo $! >"$work/$name.pid"
  until [ -f "$dir/ready" ]; do sleep 0.1; done
  python3 - "http://127.0.0.1:$((port + 2))" "$journals" >"$dir/space" <<'PY'
import json, sys, urllib.request
journal, count = sys.argv[1], int(sys.argv[2])
identity = json.load(urllib.request.urlopen(journal + "/healthz"))["identity"]
parent = {"root_id": identity["root_id"], "space_id": identity["root_space_id"]}
for n in range(count):
    body = {"parent": parent, "key": f"j{n}", "operation_id": f"j{n}"}
    created = urllib.request.Request(journal + "/v1/create", json.dumps(body).encode(),
                                     {"content-type": "application/json"})
    child = json.load(urllib.request.urlopen(created))["child"]["space_id"]
    print(json.dumps({"root_id": parent["root_id"], "space_id": child}))
PY
}
