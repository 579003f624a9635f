// Let an agent fix a failing test in a repo: put the repo in a sandbox, run
// its tests, read the failure and the code, write a fix, run them again.
//
// The "agent" here is a fixed policy so that the example runs without a
// model; with one, hand the same tools to it instead:
//
//   import { generateText, stepCountIs } from "ai";
//   import { warrenTools } from "@warren/sdk/ai";
//   await generateText({ model, tools: warrenTools(session), stopWhen: stepCountIs(20),
//     prompt: "The tests in /workspace/repo fail (sh test.sh). Fix the code, not the tests." });
//
// Run: WARREN_URL=... WARREN_KEY=... node dist-examples/fix-failing-test.js
import { Warren } from "@warren/sdk";

const warren = new Warren(); // WARREN_URL, WARREN_KEY
await using session = await warren.sessions.create({ labels: { example: "fix-failing-test" } });

// The repo: a function with an off-by-one bug, and its test.
await session.files.write("repo/lib.sh", "add() { echo $(( $1 + $2 + 1 )); }\n");
await session.files.write(
  "repo/test.sh",
  '. ./lib.sh\nfail=0\nfor c in "1 2 3" "0 0 0" "5 -2 3"; do set -- $c\n' +
    '  got=$(add $1 $2); [ "$got" = "$3" ] || { echo "FAIL add $1 $2: got $got, want $3"; fail=1; }\ndone\n' +
    '[ $fail = 0 ] && echo "all tests pass"; exit $fail\n',
);

const run = () => session.exec("cd /workspace/repo && sh test.sh");
let result = await run();
console.log(`tests exit ${result.exit_code}:\n${result.stdout}`);

// The agent's step: read the failure and the code, then write a fix.
for (let step = 0; step < 3 && result.exit_code !== 0; step++) {
  const code = await session.files.readText("repo/lib.sh");
  const fixed = code.replace(" + 1 ))", " ))");
  await session.files.write("repo/lib.sh", fixed);
  console.log(`agent rewrote lib.sh:\n${fixed}`);
  result = await run();
  console.log(`tests exit ${result.exit_code}:\n${result.stdout}`);
}
if (result.exit_code !== 0) throw new Error("the agent did not fix the test");
// `await using` deletes the session here.
