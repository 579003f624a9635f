// Package readme runs the README's quick start as a user would, against a
// daemon of its own, and checks the outputs the README shows: the blocks
// marked <!-- readme-test --> run in order in one bash, and a ```text
// block after one is the output it must print. So the README cannot drift
// from what works.
package readme
