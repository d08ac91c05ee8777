/// Many keys in one buffer, for `WriteTransaction.delete(sortedKeys:in:)` (the `KeyBatch` overload).
///
/// A bulk delete of a hundred thousand rows would otherwise allocate (and
/// free) a hundred thousand small arrays; here the keys' bytes lie end to
/// end in one buffer, with one array of end offsets beside it.
///
/// The bytes live in a buffer of this type's own (copied on write, like an
/// array's) rather than a `[UInt8]`: appending a key is then a capacity
/// check and a store, where `Array.append(contentsOf:)` from a raw buffer
/// cost about a hundred instructions a key — a sixth of a cascade delete's
/// bookkeeping.
public struct KeyBatch: Sendable {
    @usableFromInline var storage: Storage
    @usableFromInline var ends: [Int] = []

    /// An empty batch.
    public init() { storage = Storage(capacity: 0) }

    /// An empty batch with room for `capacity` keys of about `bytes`
    /// bytes each.
    public init(capacity: Int, bytes keyBytes: Int) {
        self.init(keys: capacity, totalBytes: max(capacity, 0) * max(keyBytes, 0))
    }

    /// An empty batch with room for `keys` keys of `totalBytes` in all.
    private init(keys: Int, totalBytes: Int) {
        storage = Storage(capacity: totalBytes)
        ends.reserveCapacity(keys)
    }

    /// A batch holding `keys`, in their order.
    public init(_ keys: [[UInt8]]) {
        self.init(keys: keys.count, totalBytes: keys.reduce(0) { $0 + $1.count })
        for key in keys { append(key) }
    }

    /// The number of keys.
    @inlinable public var count: Int { ends.count }
    /// True when the batch holds no key.
    @inlinable public var isEmpty: Bool { ends.isEmpty }

    /// Appends one key.
    public mutating func append(_ key: [UInt8]) {
        key.withUnsafeBytes { source in
            append(count: source.count) { $0.copyMemory(from: source) }
        }
    }

    /// Appends one key of `count` bytes written by `body` into
    /// uninitialized space (which it must fill).
    @inlinable public mutating func append(count: Int, _ body: (UnsafeMutableRawBufferPointer) -> Void) {
        reserveBytes(count)
        let start = storage.count
        body(UnsafeMutableRawBufferPointer(start: storage.pointer + start, count: count))
        storage.count = start + count
        ends.append(start + count)
    }

    /// Makes the buffer unique and gives it room for `extra` more bytes.
    @inlinable mutating func reserveBytes(_ extra: Int) {
        let needed = storage.count + extra
        if _slowPath(!isKnownUniquelyReferenced(&storage) || needed > storage.capacity) {
            storage = storage.copy(capacity: max(needed, storage.capacity * 2, 64))
        }
    }

    /// Removes every key, keeping the buffers for the next keys when no
    /// copy of the batch shares them.
    public mutating func removeAll() {
        ends.removeAll(keepingCapacity: true)
        if isKnownUniquelyReferenced(&storage) {
            storage.count = 0
        } else {
            storage = Storage(capacity: storage.capacity)
        }
    }

    /// Appends every key of `other`.
    public mutating func append(contentsOf other: KeyBatch) {
        let base = storage.count
        reserveBytes(other.storage.count)
        (storage.pointer + base).copyMemory(from: other.storage.pointer, byteCount: other.storage.count)
        storage.count = base + other.storage.count
        ends.append(contentsOf: other.ends.lazy.map { $0 + base })
    }

    /// Key `index`'s byte range.
    @inlinable func range(_ index: Int) -> Range<Int> {
        (index == 0 ? 0 : ends[index - 1])..<ends[index]
    }

    /// Calls `body` with the bytes of every key, end to end (key `i` at
    /// `range(i)`).
    @inlinable func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withExtendedLifetime(storage) {
            try body(UnsafeRawBufferPointer(start: storage.pointer, count: storage.count))
        }
    }

    /// Calls `body` with the bytes of key `index`.
    @inlinable public func withKey<R>(_ index: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let range = range(index)
        return try withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }

    /// Key `index` as an array.
    public subscript(index: Int) -> [UInt8] { withKey(index) { Array($0) } }

    /// `memcmp` order of keys `i` and `j`: negative, zero or positive.
    func compare(_ i: Int, _ j: Int) -> Int {
        let a = range(i)
        let b = range(j)
        return withExtendedLifetime(storage) {
            compareBytes(storage.pointer + a.lowerBound, a.count, storage.pointer + b.lowerBound, b.count)
        }
    }

    /// Whether every key is at least the one before it (one pass over the
    /// buffer, without a range lookup per comparison).
    public var isSorted: Bool {
        guard count > 1 else { return true }
        return withExtendedLifetime(storage) {
            let base = UnsafeRawPointer(storage.pointer)
            return ends.withUnsafeBufferPointer { ends in
                var previousStart = 0
                var previousEnd = ends[0]
                for index in 1..<ends.count {
                    let end = ends[index]
                    let order = compareBytes(
                        base + previousStart, previousEnd - previousStart, base + previousEnd, end - previousEnd)
                    if order > 0 { return false }
                    previousStart = previousEnd
                    previousEnd = end
                }
                return true
            }
        }
    }

    /// The same keys in ascending `memcmp` order.
    public func sorted() -> KeyBatch {
        var sorted = KeyBatch(keys: count, totalBytes: storage.count)
        withUnsafeBytes { all in
            for index in (0..<count).sorted(by: { compare($0, $1) < 0 }) {
                let key = UnsafeRawBufferPointer(rebasing: all[range(index)])
                sorted.append(count: key.count) { $0.copyMemory(from: key) }
            }
        }
        return sorted
    }

    /// A batch's bytes: `count` of `capacity` initialized. Shared between
    /// copies of a batch until one of them appends (copy on write).
    @usableFromInline final class Storage: @unchecked Sendable {
        @usableFromInline let pointer: UnsafeMutableRawPointer
        @usableFromInline let capacity: Int
        // Unchecked: only a uniquely referenced buffer is written (copy on
        // write), so accesses cannot overlap; the checks cost more than
        // the appends.
        @exclusivity(unchecked) @usableFromInline var count = 0

        @usableFromInline init(capacity: Int) {
            self.capacity = capacity
            pointer = UnsafeMutableRawPointer.allocate(byteCount: max(capacity, 1), alignment: 8)
        }

        deinit { pointer.deallocate() }

        /// A new buffer of `capacity` bytes holding this one's.
        @usableFromInline func copy(capacity: Int) -> Storage {
            let copy = Storage(capacity: capacity)
            copy.pointer.copyMemory(from: pointer, byteCount: count)
            copy.count = count
            return copy
        }
    }
}
