// Node 18 and 20 have no Symbol.asyncDispose. TypeScript's `await using`
// (compiled for them) looks it up at run time, and the classes here name
// their dispose method with it, so it must exist before they are defined:
// every module that defines one imports this first. Symbol.for gives the
// registry symbol that other polyfills (core-js, TypeScript's docs) use.
(Symbol as { asyncDispose?: symbol }).asyncDispose ??= Symbol.for("Symbol.asyncDispose");
export {};
