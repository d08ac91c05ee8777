// Writes the seed corpora under Fuzz/corpus/: small real store files, log
// damage inputs, random operation strings and edit lists of an object store.
// Deterministic: rerunning it rewrites the same files. Run from Fuzz/ with a
// plain build:
//
//     swift run fuzz-make-seeds                 # every corpus
//     swift run fuzz-make-seeds object-store    # only the corpora named

import StrataEngine
import StrataObjectTesting
import StrataTesting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `Fuzz/corpus`, found from this file's path.
let corpus: String = {
    var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)  // Sources/fuzz-make-seeds/main.swift
    return parts.joined(separator: "/") + "/corpus"
}()

/// The corpora to write: those named on the command line, or all.
let only = Set(CommandLine.arguments.dropFirst())

func save(_ target: String, _ name: String, _ bytes: [UInt8]) {
    guard only.isEmpty || only.contains(target) else { return }
    mkdir("\(corpus)/\(target)", 0o755)  // fails harmlessly when it exists
    let path = "\(corpus)/\(target)/\(name)"
    guard let file = fopen(path, "wb") else { fatalError("cannot write \(path)") }
    _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, bytes.count, file) }
    fclose(file)
    print("\(path): \(bytes.count) bytes")
}

func utf8(_ text: String) -> [UInt8] { Array(text.utf8) }

/// The main file of a store built by `body` and closed (checkpointed, log
/// emptied).
func storeFile(pageSize: Int = 4096, _ body: (Database) throws -> Void) throws -> [UInt8] {
    let fs = MemoryFileSystem()
    let db = try Database.open(path: "/seed", options: DatabaseOptions(pageSize: pageSize), fileSystem: fs)
    try body(db)
    let report = try db.check()
    print("  \(report.pageCount) pages of \(report.pageSize) bytes, \(report.freePages) free, \(report.trees.count) trees")
    try db.close()
    return fs.file("/seed")!.withContents { $0 }
}

// MARK: store-file

save("store-file", "empty-4096", try storeFile { _ in })
save("store-file", "empty-16384", try storeFile(pageSize: 16384) { _ in })
save(
    "store-file", "one-tree",
    try storeFile { db in
        try db.write { tx in
            let t = try tx.createTree("t")
            for i in 0..<60 { try tx.put(utf8("key\(i)"), utf8("value \(i)"), in: t) }
        }
    })
save(
    "store-file", "branches-and-overflow",
    try storeFile { db in
        try db.write { tx in
            for name in ["a", "b", "c"] {
                let t = try tx.createTree(name)
                for i in 0..<90 { try tx.put(utf8("\(name)\(i)"), [UInt8](repeating: UInt8(i), count: 30), in: t) }
                if name == "b" { try tx.put(utf8("big"), [UInt8](repeating: 0xb1, count: 6000), in: t) }
            }
        }
    })
save(
    "store-file", "freelist",
    try storeFile { db in
        try db.write { tx in
            for name in ["x", "y"] {
                let t = try tx.createTree(name)
                for i in 0..<60 { try tx.put(utf8("\(name)\(i)"), [UInt8](repeating: 7, count: 50), in: t) }
            }
        }
        try db.write { tx in
            try tx.dropTree("x")
            try tx.put(utf8("after"), utf8("drop"), in: try tx.tree("y"))
        }
    })

// MARK: wal

let log = FuzzHarness.intactLog
let frameSize = FuzzHarness.logFrameSize
let slots = (log.count - 32) / frameSize
let current = (0..<slots).prefix { log[32 + $0 * frameSize + 8..<32 + $0 * frameSize + 12] == log[16..<20] }.count
print("log: \(slots) frame slots of \(frameSize) bytes, \(current) of the current generation")
/// Byte 0 of an input cutting the log at the start of frame `frame`.
func cut(frame: Int) -> UInt8 { UInt8(1 + frame) }
func frameStart(_ frame: Int) -> Int { 32 + frame * frameSize }
let overwrite: UInt8 = 0
let truncate: UInt8 = 1

save("wal", "intact", [])
save("wal", "empty-log", [0, truncate])
save("wal", "damaged-header", [0, overwrite, 0x53, 0x57, 0x41, 0x4d])
for frame in [1, 4, 9] {
    save("wal", "truncated-at-\(frame)", [cut(frame: frame), truncate])
}
save("wal", "torn-frame-2", [cut(frame: 2), truncate] + log[frameStart(2)..<frameStart(2) + frameSize / 2])
save("wal", "frame-3-missing", [cut(frame: 3), truncate] + log[frameStart(4)..<frameStart(7)])
var flipped = Array(log[frameStart(5)..<frameStart(6)])
flipped[100] ^= 0x20
save("wal", "frame-5-flipped", [cut(frame: 5), overwrite] + flipped)
var random = SeededRandom(seed: 1)
save("wal", "garbage-after-end", [cut(frame: slots), truncate] + random.bytes(300))
save("wal", "garbage-before-stale-frames", [cut(frame: current), overwrite] + random.bytes(100))

// MARK: operations

for (i, count) in [16, 200, 1000, 4000].enumerated() {
    var random = SeededRandom(seed: UInt64(100 + i))
    save("operations", "random-\(count)", random.bytes(count))
}

// MARK: object-store

// (Building the seed stores takes a while: only when asked for.)
if only.isEmpty || only.contains("object-store") {
    for (name, input) in ObjectFuzzHarness.seeds {
        save("object-store", name, input)
    }
}

// MARK: decoders

for (name, input) in DecoderFuzzHarness.seeds() {
    save("decoders", name, input)
}

/// Unused: lets this tool link when the whole package is built with
/// `-sanitize=fuzzer` (libFuzzer's runtime refers to this symbol).
@_cdecl("LLVMFuzzerTestOneInput")
public func unusedFuzzEntry(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { 0 }

// MARK: shared-index

// Byte 0 (bit 0: reseal the header checksum; the rest and byte 1: where),
// then the damage.
save("shared-index", "intact", [])
save("shared-index", "magic", [0, 0, 0xde, 0xad, 0xbe, 0xef])
save("shared-index", "odd-sequence", [0, 1, 1])
save("shared-index", "frames-resealed", [3, 1, 0xff, 0xff, 0, 0])
save("shared-index", "backfilled-resealed", [9, 0, 0x40])
save("shared-index", "frame-list", [0, 9, 7, 7, 7, 7, 7, 7, 7, 7])
save("shared-index", "marks", [0, 8] + [UInt8](repeating: 0, count: 64))
save("shared-index", "garbage-header", [0, 0] + (0..<200).map { UInt8(truncatingIfNeeded: $0 &* 37) })
