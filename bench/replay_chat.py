#!/usr/bin/env python3
# Replays a 20-turn chat against a glia server (bench/LOG.md, prefix cache): each turn sends the whole conversation so
# far (what clients do) and appends the reply. Prints per-turn latency and the total.
import json, sys, time, urllib.request
url = sys.argv[1]  # e.g. http://127.0.0.1:8080
msgs = [{"role": "system", "content": "You are a concise assistant. Answer in one short sentence."}]
questions = ["Name a color.", "Name a fruit.", "Name a city.", "Name an animal.", "Name a planet.",
             "Name a metal.", "Name a tree.", "Name a river.", "Name a sport.", "Name a tool.",
             "Name a bird.", "Name a fish.", "Name a flower.", "Name a game.", "Name a drink.",
             "Name a dance.", "Name a shape.", "Name a cheese.", "Name a car.", "Name a star."]
total = 0.0; cached = 0; prompt = 0
for q in questions:
    msgs.append({"role": "user", "content": q})
    body = {"messages": msgs, "max_tokens": 24, "temperature": 0}
    t0 = time.time()
    r = json.load(urllib.request.urlopen(urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                                                 {"Content-Type": "application/json"})))
    dt = time.time() - t0
    total += dt
    u = r["usage"]; prompt += u["prompt_tokens"]; cached += u["prompt_tokens_details"]["cached_tokens"]
    msgs.append({"role": "assistant", "content": r["choices"][0]["message"]["content"]})
print(json.dumps({"total_s": round(total, 2), "prompt_tokens": prompt, "cached_tokens": cached,
                  "last_prompt_tokens": u["prompt_tokens"]}))
