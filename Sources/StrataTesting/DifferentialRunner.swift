import StrataEngine

/// Where a randomized run gets its choices: a seeded generator in tests, the
/// fuzzer's input bytes in `Fuzz/`.
public protocol ChoiceSource {
    /// A number in `0..<bound` (bound ≥ 1).
    mutating func choose(_ bound: Int) -> Int
    /// False once an input-driven source is exhausted.
    var hasMore: Bool { get }
}

extension SeededRandom: ChoiceSource {
    /// A number in `0..<bound` from the generator; `bound` must be at least 1.
    public mutating func choose(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
    /// Always true: a generator never runs out.
    public var hasMore: Bool { true }
}

/// Choices read from a byte string, for fuzzing; zeros once it runs out.
public struct ByteChoices: ChoiceSource {
    let bytes: [UInt8]
    var position = 0

    /// Choices read from `bytes`, from the first.
    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// False once every byte has been read.
    public var hasMore: Bool { position < bytes.count }

    /// A number in `0..<bound` made of as many bytes as `bound` needs (one per
    /// 8 bits), zeros once the bytes run out; 0, reading nothing, when `bound`
    /// is 1 or less.
    public mutating func choose(_ bound: Int) -> Int {
        var value = 0
        var range = 1
        while range < bound {
            let b = position < bytes.count ? Int(bytes[position]) : 0
            position += 1
            value = value << 8 | b
            range <<= 8
        }
        return bound <= 1 ? 0 : value % bound
    }
}

/// Drives the engine and an in-memory sorted map with the same random
/// operations (put, delete, get, range scan, commit, rollback, reopen) and
/// reports the first difference.
///
/// Keys are drawn from a small alphabet so that puts often replace and
/// deletes often hit; sizes run from 0 bytes to `Database.maxKeyLength`
/// for keys and from 0 to three pages for values.
public final class DifferentialRunner {
    /// A difference between the store and the reference map, or a failed
    /// `check()`.
    public struct Mismatch: Error, CustomStringConvertible {
        /// What differed, and after how many operations.
        public let description: String
    }

    /// The store under test; each reopen replaces it.
    public private(set) var db: Database
    let reopen: () throws -> Database
    /// Committed state.
    public private(set) var model = SortedModel()
    /// The operations run so far, reopens included.
    public private(set) var operations = 0
    let treeName = "diff"

    /// `reopen` closes nothing: the runner closes `db` first, then calls it.
    public init(db: Database, reopen: @escaping () throws -> Database) {
        self.db = db
        self.reopen = reopen
    }

    func randomKey<C: ChoiceSource>(_ c: inout C) -> [UInt8] {
        switch c.choose(20) {
        case 0: return []
        case 1: return [UInt8](repeating: UInt8(c.choose(4)), count: Database.maxKeyLength - c.choose(2))
        case 2, 3: return (0..<(1 + c.choose(300))).map { _ in UInt8(c.choose(3)) }
        default:
            // Short keys with a shared prefix: deep, dense trees.
            var key: [UInt8] = [0x6b]
            let n = c.choose(6000)
            key += [UInt8(n >> 8), UInt8(n & 0xff)]
            if c.choose(3) == 0 { key += [UInt8(c.choose(256))] }
            return key
        }
    }

    func randomValue<C: ChoiceSource>(_ c: inout C) -> [UInt8] {
        let page = db.pageSize
        let size: Int
        switch c.choose(20) {
        case 0: size = 0
        case 1: size = page * 3
        case 2: size = c.choose(page * 3)
        case 3: size = layoutMaxInline(page) - 10 + c.choose(20)
        default: size = c.choose(120)
        }
        // Distinct head and tail bytes catch values cut short or mixed up.
        var value = [UInt8](repeating: UInt8(c.choose(256)), count: size)
        for i in 0..<min(size, 8) {
            value[i] = UInt8(c.choose(256))
            value[size - 1 - i] = UInt8(c.choose(256))
        }
        return value
    }

    /// Runs `count` operations (or until an input-driven source runs out).
    public func run<C: ChoiceSource>(_ count: Int, choices c: inout C) throws {
        var done = 0
        while done < count && c.hasMore {
            let batch = 1 + c.choose(c.choose(10) == 0 ? 400 : 40)
            let action = c.choose(20)
            if action == 0 {
                try reopenStore()
                operations += 1
                done += 1
                continue
            }
            let tx = try db.beginWrite()
            let tree = try tx.createTree(treeName)
            var pending = model
            for _ in 0..<batch {
                switch c.choose(20) {
                case 0...10:
                    let key = randomKey(&c)
                    let value = randomValue(&c)
                    try tx.put(key, value, in: tree)
                    pending.put(key, value)
                case 11...14:
                    let key = c.choose(3) == 0 || pending.isEmpty ? randomKey(&c) : pending.key(at: c.choose(pending.count))
                    let deleted = try tx.delete(key, in: tree)
                    guard deleted == pending.remove(key) else {
                        throw Mismatch(
                            description: "delete of \(key.prefix(8)) returned \(deleted) after \(operations) operations")
                    }
                case 15...18:
                    let key = c.choose(2) == 0 || pending.isEmpty ? randomKey(&c) : pending.key(at: c.choose(pending.count))
                    let got = try tx.get(key, in: tree)
                    guard got == pending[key] else {
                        throw Mismatch(
                            description:
                                "get in write transaction differs for key \(key.prefix(8)) after \(operations) operations")
                    }
                default:
                    try compareScan(tx: tx, tree: tree, expected: pending, c: &c)
                }
                operations += 1
                done += 1
            }
            guard try tx.count(tree) == pending.count else {
                throw Mismatch(description: "count \(try tx.count(tree)) != \(pending.count) after \(operations) operations")
            }
            if action == 1 {
                tx.rollback()
            } else {
                try tx.commit()
                model = pending
            }
            if c.choose(25) == 0 { try verifyAll() }
        }
    }

    /// Compares a range scan of at most 64 entries, in either direction.
    func compareScan<C: ChoiceSource>(tx: ReadTransaction, tree: Tree, expected: SortedModel, c: inout C) throws {
        var lower: [UInt8]? = c.choose(3) == 0 ? nil : randomKey(&c)
        var upper: [UInt8]? = c.choose(3) == 0 ? nil : randomKey(&c)
        if let l = lower, let u = upper, u.lexicographicallyPrecedes(l) { swap(&lower, &upper) }
        let reverse = c.choose(2) == 0
        let limit = 64
        let range = expected.indices(from: lower, to: upper)
        let wanted = reverse ? Array(range.reversed().prefix(limit)) : Array(range.prefix(limit))
        var got: [([UInt8], [UInt8])] = []
        try tx.forEach(tree, from: lower, to: upper, reverse: reverse) { key, value in
            got.append((key, value))
            return got.count < limit
        }
        guard got.count == wanted.count else {
            throw Mismatch(
                description: "scan returned \(got.count) entries, expected \(wanted.count), after \(operations) operations")
        }
        for (i, entry) in got.enumerated() where entry.0 != expected.keys[wanted[i]] || entry.1 != expected.values[wanted[i]] {
            throw Mismatch(description: "scan entry \(i) differs after \(operations) operations")
        }
    }

    /// Closes and reopens the store, then compares everything.
    public func reopenStore() throws {
        try db.close()
        db = try reopen()
        try verifyAll()
    }

    /// Compares the whole committed state and runs `check()`.
    public func verifyAll() throws {
        try db.read { tx in
            guard let tree = try tx.treeIfPresent(treeName) else {
                if model.isEmpty { return }
                throw Mismatch(description: "tree missing after \(operations) operations")
            }
            let all = try tx.scan(tree)
            guard all.count == model.count, try tx.count(tree) == model.count else {
                throw Mismatch(
                    description: "store has \(all.count) entries, model \(model.count), after \(operations) operations")
            }
            for (i, entry) in all.enumerated() where entry.key != model.keys[i] || entry.value != model.values[i] {
                throw Mismatch(description: "entry \(i) (key \(entry.key.prefix(8))) differs after \(operations) operations")
            }
        }
        let report = try db.check()
        guard report.isHealthy else {
            throw Mismatch(description: "check failed after \(operations) operations:\n\(report)")
        }
    }
}

/// The largest cell stored inline at a page size (mirrors the engine's rule,
/// used to aim values at the inline/overflow boundary).
func layoutMaxInline(_ pageSize: Int) -> Int { (pageSize - 16) / 4 - 2 }

/// A sorted map of byte strings: the reference the engine is compared with.
public struct SortedModel {
    /// The keys, ascending.
    public private(set) var keys: [[UInt8]] = []
    /// The values, in the order of `keys`.
    public private(set) var values: [[UInt8]] = []

    /// An empty map.
    public init() {}

    /// The number of entries.
    public var count: Int { keys.count }
    /// True when the map holds no entry.
    public var isEmpty: Bool { keys.isEmpty }

    /// Index of the first key >= `key`.
    public func lowerBound(_ key: [UInt8]) -> Int {
        var lo = 0
        var hi = keys.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if keys[mid].lexicographicallyPrecedes(key) { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// The value stored under `key`, or nil.
    public subscript(key: [UInt8]) -> [UInt8]? {
        let i = lowerBound(key)
        return i < keys.count && keys[i] == key ? values[i] : nil
    }

    /// The key at position `i`, in ascending order.
    public func key(at i: Int) -> [UInt8] { keys[i] }

    /// Stores `value` under `key`, replacing the value there.
    public mutating func put(_ key: [UInt8], _ value: [UInt8]) {
        let i = lowerBound(key)
        if i < keys.count && keys[i] == key {
            values[i] = value
        } else {
            keys.insert(key, at: i)
            values.insert(value, at: i)
        }
    }

    /// Removes `key`; returns whether it was present.
    public mutating func remove(_ key: [UInt8]) -> Bool {
        let i = lowerBound(key)
        guard i < keys.count && keys[i] == key else { return false }
        keys.remove(at: i)
        values.remove(at: i)
        return true
    }

    /// Indices of keys with `lower <= key < upper`.
    public func indices(from lower: [UInt8]?, to upper: [UInt8]?) -> Range<Int> {
        let lo = lower.map(lowerBound) ?? 0
        let hi = upper.map(lowerBound) ?? keys.count
        return lo..<max(lo, hi)
    }
}
