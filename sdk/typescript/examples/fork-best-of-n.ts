// Fork 5 attempts from one snapshot and keep the best: prepare a session
// once, fork it into 5 sessions that start from its files, try something
// different in each, score them, keep the winner and delete the rest.
//
// Run: WARREN_URL=... WARREN_KEY=... node dist-examples/fork-best-of-n.js
import { Warren, type Session } from "@warren/sdk";

await using warren = new Warren(); // deletes every session it created at the end
const base = await warren.sessions.create({ labels: { example: "fork-best-of-n" } });
// The expensive setup, done once: here a data file and a scorer.
await base.exec("seq 1 2000 | shuf --random-source=/dev/zero > /workspace/data.txt 2>/dev/null || seq 2000 -1 1 > /workspace/data.txt");
await base.files.write("/workspace/score.sh", 'start=$(date +%s%N); sh /workspace/solve.sh > /tmp/out; end=$(date +%s%N)\ncmp -s /tmp/out /workspace/want && echo $(( (end - start) / 1000 )) || echo fail\n');
await base.exec("sort -n /workspace/data.txt > /workspace/want");

const { snapshot, sessions } = await base.fork({ count: 5 });
console.log(`forked ${sessions.length} sessions from snapshot ${snapshot.name}`);

// Five attempts at "sort the file numerically"; one of them is wrong.
const attempts = [
  "sort -n /workspace/data.txt",
  "sort /workspace/data.txt",
  "sort -g /workspace/data.txt",
  "awk '{print}' /workspace/data.txt | sort -n",
  "sort -n -S 1M /workspace/data.txt",
];
const scored = await Promise.all(
  sessions.map(async (s: Session, i: number) => {
    await s.files.write("/workspace/solve.sh", attempts[i] + "\n");
    const out = (await s.exec("sh /workspace/score.sh")).stdout.trim();
    return { s, attempt: attempts[i], micros: out === "fail" ? Infinity : Number(out) };
  }),
);
scored.sort((a, b) => a.micros - b.micros);
for (const r of scored) console.log(`${r.micros === Infinity ? "wrong" : r.micros + " µs"}\t${r.attempt}`);
const best = scored[0]!;
if (best.micros === Infinity) throw new Error("no attempt was right");
for (const r of scored.slice(1)) await r.s.delete();
console.log(`kept ${best.s.id}: ${best.attempt}`);
