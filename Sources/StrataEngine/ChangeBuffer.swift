#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One tree's puts and deletes held back once a write transaction has
/// spilled (see ``WriteTransaction/put(_:_:in:)``), in the order made.
///
/// The changes' bytes lie end to end in one buffer, each as a 6-byte
/// header (the key's length, then the value's or ``deleteMark``) followed
/// by the key and the value, with the offset of each beside them. Each
/// change held as two arrays of its own cost a retain of each when it was
/// buffered and again when it was applied, and the arrays lay scattered
/// over the heap: in a 1M random-key load the retains alone were a tenth
/// of the time, most of them cache misses. Here applying a change touches
/// one offset and one run of bytes, and the memory is reused by the next
/// buffer of the transaction.
///
/// Only the transaction's writer uses it (see `WriteTransaction`), so its
/// properties skip the runtime's exclusivity checks: a buffered delete
/// made four of them (about 230 instructions of 3,700).
final class ChangeBuffer {
    /// The tree the changes go to.
    @exclusivity(unchecked) var tree: Tree
    /// The store's path, for the error of a failed allocation.
    private let path: String
    /// `capacity` bytes, `used` of them holding changes.
    @exclusivity(unchecked) private var bytes: UnsafeMutableRawPointer
    @exclusivity(unchecked) private(set) var capacity: Int
    @exclusivity(unchecked) private var used = 0
    /// Where each change starts in the buffer, in the order made (so an
    /// earlier change has the smaller offset).
    @exclusivity(unchecked) private(set) var starts: [Int] = []
    /// How many of the changes are puts.
    @exclusivity(unchecked) var puts = 0
    /// The buffered deletes by a 64-bit digest of their key (see
    /// `WriteTransaction.deleteDigest`): the offset of the first delete
    /// with that digest. While the buffer holds no put, a key is in the
    /// tree as its pages show unless it is among the buffered deletes. A
    /// digest found here is confirmed against that change's key; only a
    /// collision of two keys' digests costs a scan, never a wrong answer.
    @exclusivity(unchecked) private var deletedDigests: [UInt64: Int] = [:]

    /// The value length that marks a delete (no value is this long: see
    /// ``Database/maxValueLength``).
    static let deleteMark = UInt32.max
    private static let headerSize = 6

    /// Throws ``StorageError/io(operation:path:errno:)`` with `ENOMEM`
    /// when the first 64 KiB cannot be allocated.
    init(tree: Tree, path: String) throws {
        self.tree = tree
        self.path = path
        let first = 1 << 16
        capacity = first
        guard let bytes = malloc(first) else {
            throw StorageError.io(operation: "allocate \(first) bytes of buffered changes", path: path, errno: ENOMEM)
        }
        self.bytes = bytes
    }

    deinit { free(bytes) }

    /// The number of changes held.
    var count: Int { starts.count }

    /// Holds a put of `value` under `key` (their lengths already checked).
    /// Throws, holding nothing more, when the buffer cannot grow.
    func appendPut(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws {
        try append(key, value, valueMark: UInt32(value.count))
        puts += 1
    }

    /// Holds a delete of `key`, whose digest is `digest`. Throws, holding
    /// nothing more, when the buffer cannot grow.
    func appendDelete(of key: UnsafeRawBufferPointer, digest: UInt64) throws {
        let start = used
        try append(key, UnsafeRawBufferPointer(start: nil, count: 0), valueMark: Self.deleteMark)
        if deletedDigests[digest] == nil { deletedDigests[digest] = start }
    }

    private func append(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, valueMark: UInt32) throws {
        let size = Self.headerSize + key.count + value.count
        if _slowPath(used + size > capacity) { try grow(toHold: used + size) }
        let p = bytes + used
        p.storeBytes(of: UInt16(key.count), as: UInt16.self)
        (p + 2).storeBytes(of: valueMark, as: UInt32.self)
        if let k = key.baseAddress { (p + Self.headerSize).copyMemory(from: k, byteCount: key.count) }
        if let v = value.baseAddress { (p + Self.headerSize + key.count).copyMemory(from: v, byteCount: value.count) }
        starts.append(used)
        used += size
    }

    /// Doubles the buffer until `needed` bytes fit (`realloc`: a large
    /// buffer moves by remapping its pages, not by copying them). When
    /// the memory is not there, throws ``StorageError/io(operation:path:errno:)``
    /// with `ENOMEM` and leaves the buffer as it was.
    private func grow(toHold needed: Int) throws {
        var newCapacity = capacity
        while newCapacity < needed { newCapacity *= 2 }
        guard let moved = realloc(bytes, newCapacity) else {
            throw StorageError.io(
                operation: "grow buffered changes to \(newCapacity) bytes", path: path, errno: ENOMEM)
        }
        bytes = moved
        capacity = newCapacity
    }

    /// The key of the change at `start`. Valid until the buffer changes.
    @inline(__always) func key(at start: Int) -> UnsafeRawBufferPointer {
        let p = UnsafeRawPointer(bytes + start)
        return UnsafeRawBufferPointer(start: p + Self.headerSize, count: Int(p.loadUnaligned(as: UInt16.self)))
    }

    /// The value of the change at `start`, or nil for a delete. Valid
    /// until the buffer changes.
    @inline(__always) func value(at start: Int) -> UnsafeRawBufferPointer? {
        let p = UnsafeRawPointer(bytes + start)
        let mark = p.loadUnaligned(fromByteOffset: 2, as: UInt32.self)
        guard mark != Self.deleteMark else { return nil }
        let keyCount = Int(p.loadUnaligned(as: UInt16.self))
        return UnsafeRawBufferPointer(start: p + Self.headerSize + keyCount, count: Int(mark))
    }

    /// True when a delete of `key` is held.
    func holdsDelete(of key: UnsafeRawBufferPointer, digest: UInt64) -> Bool {
        guard let start = deletedDigests[digest] else { return false }
        if Self.equal(self.key(at: start), key) { return true }
        return starts.contains { value(at: $0) == nil && Self.equal(self.key(at: $0), key) }
    }

    @inline(__always) private static func equal(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        a.count == b.count
            && compareBytes(
                a.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, a.count,
                b.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, b.count) == 0
    }

    /// Empties the buffer for `tree`'s changes, keeping its memory.
    func reset(for tree: Tree) {
        self.tree = tree
        used = 0
        puts = 0
        starts.removeAll(keepingCapacity: true)
        deletedDigests.removeAll(keepingCapacity: true)
    }
}
