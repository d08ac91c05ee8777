/// A set of row ids that only grows: the rows a cascade has reached.
///
/// Open addressing with linear probing and the hash of ``RowMap`` (a row's
/// low bits plus a multiplicative hash of the bits above the table size),
/// so the consecutive rows a cascade usually meets fill consecutive slots.
/// Key 0 marks an empty slot; row 0, which the store never allocates, is
/// kept in a flag so the set is total. It exists for the same reason as
/// ``RowMap``: `Set<Int64>` hashes every row with SipHash, which costs more
/// than the rest of following a cascade to it.
struct RowSet {
    private var keys: [Int64]
    private var mask: Int
    private var hasZero = false
    private(set) var count = 0

    init() {
        keys = Array(repeating: 0, count: 16)
        mask = 15
    }

    /// Makes room for `count` rows in all without growing again.
    mutating func reserve(_ count: Int) {
        var size = keys.count
        while count * 4 > size * 3 { size <<= 1 }
        if size > keys.count { rebuild(size: size) }
    }

    private func home(_ row: Int64) -> Int { RowMap.home(row, mask: mask) }

    func contains(_ row: Int64) -> Bool {
        if row == 0 { return hasZero }
        var index = home(row)
        while true {
            let key = keys[index]
            if key == row { return true }
            if key == 0 { return false }
            index = (index + 1) & mask
        }
    }

    /// Adds `row`; returns false when it was there already.
    @discardableResult mutating func insert(_ row: Int64) -> Bool {
        if row == 0 {
            defer { hasZero = true }
            if !hasZero { count += 1 }
            return !hasZero
        }
        var index = home(row)
        while true {
            let key = keys[index]
            if key == row { return false }
            if key == 0 { break }
            index = (index + 1) & mask
        }
        keys[index] = row
        count += 1
        if count * 4 > keys.count * 3 { grow() }
        return true
    }

    private mutating func grow() { rebuild(size: keys.count * 2) }

    private mutating func rebuild(size: Int) {
        let old = keys
        keys = Array(repeating: 0, count: size)
        mask = keys.count - 1
        for row in old where row != 0 {
            var index = home(row)
            while keys[index] != 0 { index = (index + 1) & mask }
            keys[index] = row
        }
    }
}
