// A small tar (POSIX ustar + pax for long names) writer and reader for
// Files.uploadDir and downloadDir, so that the SDK needs no tar package.
// Regular files, directories and symlinks; modes and mtimes are kept.
// Node, Bun and Deno only (node:fs); the browser build never loads it.
// The archive is held in memory: for trees larger than memory, stream a
// tar of your own through Files.uploadTar / downloadTar.

import { lstat, mkdir, readdir, readFile, readlink, symlink, writeFile, chmod, utimes } from "node:fs/promises";
import { join, resolve, sep } from "node:path";

const BLOCK = 512;
const te = new TextEncoder();

function octal(n: number, width: number): string {
  return n.toString(8).padStart(width - 1, "0") + "\0";
}

function header(name: string, type: string, size: number, mode: number, mtime: number, link = ""): Uint8Array[] {
  const out: Uint8Array[] = [];
  const nameBytes = te.encode(name);
  const linkBytes = te.encode(link);
  if (nameBytes.length > 100 || linkBytes.length > 100) {
    // A pax extended header carries the long path (and link target).
    let recs = "";
    const rec = (k: string, v: string) => {
      const body = ` ${k}=${v}\n`;
      let len = te.encode(body).length;
      len += String(len).length;
      if (String(len).length !== String(len - String(len).length).length) len++;
      return `${len}${body}`;
    };
    if (nameBytes.length > 100) recs += rec("path", name);
    if (linkBytes.length > 100) recs += rec("linkpath", link);
    const data = te.encode(recs);
    out.push(...header("PaxHeader", "x", data.length, 0o644, mtime), ...pad(data));
  }
  const h = new Uint8Array(BLOCK);
  const put = (s: string | Uint8Array, off: number, max: number) => h.set((typeof s === "string" ? te.encode(s) : s).subarray(0, max), off);
  put(nameBytes, 0, 100);
  put(octal(mode & 0o7777, 8), 100, 8);
  put(octal(0, 8), 108, 8);
  put(octal(0, 8), 116, 8);
  put(octal(size, 12), 124, 12);
  put(octal(Math.floor(mtime), 12), 136, 12);
  put("        ", 148, 8);
  put(type, 156, 1);
  put(linkBytes, 157, 100);
  put("ustar\0" + "00", 257, 8);
  let sum = 0;
  for (const b of h) sum += b;
  put(sum.toString(8).padStart(6, "0") + "\0 ", 148, 8);
  out.push(h);
  return out;
}

function pad(data: Uint8Array): Uint8Array[] {
  const rest = data.length % BLOCK;
  return rest ? [data, new Uint8Array(BLOCK - rest)] : [data];
}

/** Packs the directory dir (entry names relative to it) into a tar. */
export async function packDir(dir: string): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  const walk = async (abs: string, rel: string) => {
    for (const name of (await readdir(abs)).sort()) {
      const a = join(abs, name);
      const r = rel ? `${rel}/${name}` : name;
      const st = await lstat(a);
      const mtime = st.mtimeMs / 1000;
      if (st.isDirectory()) {
        parts.push(...header(r + "/", "5", 0, st.mode, mtime));
        await walk(a, r);
      } else if (st.isSymbolicLink()) {
        parts.push(...header(r, "2", 0, st.mode, mtime, await readlink(a)));
      } else if (st.isFile()) {
        const data = await readFile(a);
        parts.push(...header(r, "0", data.length, st.mode, mtime), ...pad(new Uint8Array(data.buffer, data.byteOffset, data.length)));
      }
    }
  };
  await walk(dir, "");
  parts.push(new Uint8Array(BLOCK * 2));
  const total = parts.reduce((n, p) => n + p.length, 0);
  const out = new Uint8Array(total);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

function str(b: Uint8Array): string {
  const z = b.indexOf(0);
  return new TextDecoder().decode(z < 0 ? b : b.subarray(0, z));
}

function num(b: Uint8Array): number {
  const s = str(b).trim();
  return s ? parseInt(s, 8) : 0;
}

/**
 * Extracts a tar into dir (created if missing). Entries that would land
 * outside dir (absolute names, `..`) are refused with an error.
 */
export async function unpackTo(tar: Uint8Array, dir: string): Promise<void> {
  const root = resolve(dir);
  await mkdir(root, { recursive: true });
  let off = 0;
  let longName: string | undefined;
  let longLink: string | undefined;
  const dirTimes: [string, number][] = [];
  while (off + BLOCK <= tar.length) {
    const h = tar.subarray(off, off + BLOCK);
    if (h.every((b) => b === 0)) break;
    const size = num(h.subarray(124, 136));
    const type = String.fromCharCode(h[156] || 48);
    const data = tar.subarray(off + BLOCK, off + BLOCK + size);
    off += BLOCK + Math.ceil(size / BLOCK) * BLOCK;
    if (type === "x") {
      for (const line of new TextDecoder().decode(data).split("\n")) {
        const m = /^\d+ ([^=]+)=(.*)$/s.exec(line);
        if (m?.[1] === "path") longName = m[2];
        if (m?.[1] === "linkpath") longLink = m[2];
      }
      continue;
    }
    if (type === "g") continue;
    if (type === "L") {
      longName = str(data);
      continue;
    }
    if (type === "K") {
      longLink = str(data);
      continue;
    }
    const prefix = str(h.subarray(345, 500));
    let name = longName ?? (prefix ? `${prefix}/${str(h.subarray(0, 100))}` : str(h.subarray(0, 100)));
    const link = longLink ?? str(h.subarray(157, 257));
    longName = longLink = undefined;
    name = name.replace(/\/+$/, "");
    if (name === "" || name === ".") continue;
    const target = resolve(root, name);
    if (target !== root && !target.startsWith(root + sep)) throw new Error(`tar: entry ${JSON.stringify(name)} is outside ${root}`);
    const mode = num(h.subarray(100, 108)) & 0o7777;
    const mtime = num(h.subarray(136, 148));
    if (type === "5") {
      await mkdir(target, { recursive: true });
      await chmod(target, mode || 0o755);
      dirTimes.push([target, mtime]);
    } else if (type === "2") {
      await mkdir(resolve(target, ".."), { recursive: true });
      await symlink(link, target);
    } else if (type === "0" || type === "\0" || type === "7") {
      await mkdir(resolve(target, ".."), { recursive: true });
      await writeFile(target, data);
      await chmod(target, mode || 0o644);
      await utimes(target, mtime, mtime);
    }
    // Hard links, devices and fifos are skipped: a sandbox's tree is copied
    // for its contents, and the host's user may not create devices.
  }
  for (const [d, t] of dirTimes.reverse()) await utimes(d, t, t);
}
