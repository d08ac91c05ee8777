/// The byte layout of B+tree pages (branch and leaf), overflow pages and
/// freelist trunk pages.
///
/// Branch and leaf pages are slotted pages:
///
/// ```
/// OFFSET SIZE DESCRIPTION
///      0    4 CRC-32C (see Page.computeChecksum)
///      4    1 page type: 2 branch, 3 leaf
///      5    1 reserved, zero
///      6    2 cell count N
///      8    2 start of the cell heap (0 means pageSize, for 65536-byte pages)
///     10    2 fragmented bytes: holes inside the cell heap
///     12    4 branch: right-most child page; leaf: zero
///     16   2N slot array: offsets of the cells, in key order
///      .    . free space
///   heap    . cells, in any order
/// ```
///
/// Leaf cell: `varint keyLength, varint valueLength, key, payload` where the
/// payload is the value itself when the cell fits in `maxInlineCell`, and
/// otherwise the 4-byte number of the first overflow page that holds the
/// whole value.
///
/// Branch cell: `4-byte child page, varint keyLength, key`. Every key in the
/// child's subtree is below the cell's key and at or above the previous
/// cell's key; keys at or above the last cell's key live under the right-most
/// child. Separator keys are truncated to the shortest prefix that still
/// separates the two neighbouring leaves.
///
/// Overflow page: `checksum(4) type=4(1) reserved(3) next page(4, 0 ends)
/// bytes used(4) data`.
///
/// Freelist trunk page: `checksum(4) type=5(1) reserved(3) next trunk(4)
/// count(4) count × page number(4)`.
///
/// Limits: a cell never exceeds `maxInlineCell` = (pageSize − 16) / 4 − 2, so
/// every page holds at least four cells and a split always succeeds. Keys
/// are at most ``Database/maxKeyLength`` (960) bytes so that a key with its
/// overflow pointer, or a separator with its child pointer, fits in one cell
/// at the smallest page size.
enum Layout {
    static let nodeHeaderSize = 16
    static let overflowHeaderSize = 16
    static let trunkHeaderSize = 16

    @inline(__always) static func maxInlineCell(pageSize: Int) -> Int { (pageSize - nodeHeaderSize) / 4 - 2 }
    @inline(__always) static func overflowCapacity(pageSize: Int) -> Int { pageSize - overflowHeaderSize }
    @inline(__always) static func trunkCapacity(pageSize: Int) -> Int { (pageSize - trunkHeaderSize) / 4 }
}

// MARK: - Cell lengths (varints of at most 5 bytes, through `Varint`)

@inline(__always) func varintSize(_ v: Int) -> Int { Varint.size(of: UInt64(v)) }

@inline(__always) func writeVarint(_ p: UnsafeMutableRawPointer, _ v: Int) -> Int { Varint.store(UInt64(v), at: p) }

/// Reads a cell length; returns (value, bytes used), or nil when it runs
/// past `limit` bytes or past 5 bytes.
@inline(__always) func readVarint(_ p: UnsafeRawPointer, limit: Int) -> (Int, Int)? {
    var end = 0
    guard let value = Varint.decode(p, at: &end, limit: min(limit, 5)) else { return nil }
    return (Int(value), end)
}
