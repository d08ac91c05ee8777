import BenchSupport
import Foundation
import StrataEngine

/// Every key, value and access order the workloads use, generated once up
/// front (outside any timed region) from fixed seeds, in the representation
/// each engine takes: `[UInt8]` for Strata, `Data` for GRDB.
struct Dataset {
    static let keyLength = 16
    static let valueLength = 100
    /// Number of single-put durable commits (workload 4).
    static let commitCount = 1000
    /// The seed of the keys and values.
    static let seed: UInt64 = 0x5354_5241_5441_0001

    /// The `count` keys of the bulk load, in insertion (random) order.
    let keys: [[UInt8]]
    let values: [[UInt8]]
    let keyData: [Data]
    let valueData: [Data]

    /// A permutation of `keys.indices`: the point-read order.
    let readOrder: [Int]
    /// The keys in point-read order, as fresh copies allocated in that
    /// order, for both engines alike: walking them touches memory
    /// sequentially, so the reads measure the engines, not cache misses on
    /// the benchmark's own key objects scattered across the heap.
    let readKeys: [[UInt8]]
    let readKeyData: [Data]
    /// Distinct indices into `keys`: the entries the delete workload removes.
    let deleteOrder: [Int]

    /// New keys (not among `keys`) for the single-put commits.
    let commitKeys: [[UInt8]]
    let commitValues: [[UInt8]]
    let commitKeyData: [Data]
    let commitValueData: [Data]

    /// - Parameters:
    ///   - count: number of entries of the bulk load.
    ///   - deleteCount: number of those entries the delete workload removes.
    init(count: Int, deleteCount: Int) {
        precondition(count > 0 && (0...count).contains(deleteCount))
        var rng = SeededRandom(seed: Self.seed)
        var keys: [[UInt8]] = []
        var values: [[UInt8]] = []
        keys.reserveCapacity(count)
        values.reserveCapacity(count)
        for _ in 0..<count {
            keys.append(rng.bytes(Self.keyLength))
            values.append(rng.bytes(Self.valueLength))
        }
        var commitKeys: [[UInt8]] = []
        var commitValues: [[UInt8]] = []
        for _ in 0..<Self.commitCount {
            commitKeys.append(rng.bytes(Self.keyLength))
            commitValues.append(rng.bytes(Self.valueLength))
        }

        var orderRng = SeededRandom(seed: 0x5354_5241_5441_0002)
        var readOrder = Array(0..<count)
        readOrder.shuffle(using: &orderRng)
        var deleteOrder = Array(0..<count)
        deleteOrder.shuffle(using: &orderRng)

        self.keys = keys
        self.values = values
        keyData = keys.map { Data($0) }
        valueData = values.map { Data($0) }
        self.readOrder = readOrder
        readKeys = readOrder.map { Array(keys[$0]) }
        readKeyData = readOrder.map { Data(keys[$0]) }
        self.deleteOrder = Array(deleteOrder.prefix(deleteCount))
        self.commitKeys = commitKeys
        self.commitValues = commitValues
        commitKeyData = commitKeys.map { Data($0) }
        commitValueData = commitValues.map { Data($0) }
    }
}

/// What an ordered scan saw: entry count, total bytes and an order-sensitive
/// hash of the keys and values. Both engines must report the same digest
/// for the same contents, which checks that each scan really read the data.
struct ScanDigest: Equatable, CustomStringConvertible {
    private(set) var entries = 0
    private(set) var bytes = 0
    private(set) var hash: UInt64 = 0xCBF2_9CE4_8422_2325

    /// Folds one entry into the digest (FNV-1a over every key byte and the
    /// first and last value bytes, so the whole key and the value are read).
    mutating func add(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        entries += 1
        bytes += key.count + value.count
        for byte in key { mix(byte) }
        if let first = value.first, let last = value.last {
            mix(first)
            mix(last)
        }
    }

    private mutating func mix(_ byte: UInt8) {
        hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3
    }

    var description: String {
        "\(entries) entries, \(bytes) bytes, hash \(String(hash, radix: 16))"
    }
}
