/// Many keys in one buffer, for `WriteTransaction.delete(sortedKeys:in:)` (the `KeyBatch` overload).
///
/// A bulk delete of a hundred thousand rows would otherwise allocate (and
/// free) a hundred thousand small arrays; here the keys' bytes lie end to
/// end in one array, with one array of end offsets beside it.
public struct KeyBatch: Sendable {
    @usableFromInline var bytes: [UInt8] = []
    @usableFromInline var ends: [Int] = []

    public init() {}

    /// An empty batch with room for `capacity` keys of about `bytes`
    /// bytes each.
    public init(capacity: Int, bytes keyBytes: Int) {
        bytes.reserveCapacity(capacity * keyBytes)
        ends.reserveCapacity(capacity)
    }

    /// A batch holding `keys`, in their order.
    public init(_ keys: [[UInt8]]) {
        ends.reserveCapacity(keys.count)
        for key in keys { append(key) }
    }

    /// The number of keys.
    @inlinable public var count: Int { ends.count }
    @inlinable public var isEmpty: Bool { ends.isEmpty }

    /// Appends one key.
    @inlinable public mutating func append(_ key: [UInt8]) {
        bytes.append(contentsOf: key)
        ends.append(bytes.count)
    }

    /// Appends one key of `count` bytes written by `body` into
    /// uninitialized space.
    /// (Written into scratch space on the stack, then copied in: growing
    /// the array by a run of zeros first went element by element.)
    @inlinable public mutating func append(count: Int, _ body: (UnsafeMutableRawBufferPointer) -> Void) {
        withUnsafeTemporaryAllocation(byteCount: count, alignment: 8) { scratch in
            body(scratch)
            bytes.append(contentsOf: UnsafeRawBufferPointer(scratch))
        }
        ends.append(bytes.count)
    }

    /// Appends every key of `other`.
    public mutating func append(contentsOf other: KeyBatch) {
        let base = bytes.count
        bytes.append(contentsOf: other.bytes)
        ends.append(contentsOf: other.ends.map { $0 + base })
    }

    /// Key `index`'s byte range.
    @inlinable func range(_ index: Int) -> Range<Int> {
        (index == 0 ? 0 : ends[index - 1])..<ends[index]
    }

    /// Calls `body` with the bytes of key `index`.
    @inlinable public func withKey<R>(_ index: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let range = range(index)
        return try bytes.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }

    /// Key `index` as an array.
    public subscript(index: Int) -> [UInt8] { Array(bytes[range(index)]) }

    /// `memcmp` order of keys `i` and `j`: negative, zero or positive.
    func compare(_ i: Int, _ j: Int) -> Int {
        bytes.withUnsafeBytes { all in
            let a = range(i)
            let b = range(j)
            let base = all.baseAddress ?? UnsafeRawPointer(bitPattern: 1).unsafelyUnwrapped
            return compareBytes(base + a.lowerBound, a.count, base + b.lowerBound, b.count)
        }
    }

    /// Whether every key is at least the one before it.
    public var isSorted: Bool {
        count < 2 || (1..<count).allSatisfy { compare($0 - 1, $0) <= 0 }
    }

    /// The same keys in ascending `memcmp` order.
    public func sorted() -> KeyBatch {
        var sorted = KeyBatch()
        sorted.bytes.reserveCapacity(bytes.count)
        sorted.ends.reserveCapacity(count)
        bytes.withUnsafeBytes { all in
            for index in (0..<count).sorted(by: { compare($0, $1) < 0 }) {
                sorted.bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: all[range(index)]))
                sorted.ends.append(sorted.bytes.count)
            }
        }
        return sorted
    }
}
