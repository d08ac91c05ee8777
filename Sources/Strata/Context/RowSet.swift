/// A set of row ids: the rows a cascade has reached, the rows
/// `delete(model:where:)` marked without building their models.
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

    /// Takes `row` out; returns false when it was not there.
    ///
    /// Backward-shift deletion, so the table never holds tombstones: the
    /// run after the freed slot is walked, and each key whose probe path
    /// crosses the hole moves into it (the hole then moves to its slot).
    @discardableResult mutating func remove(_ row: Int64) -> Bool {
        if row == 0 {
            defer { hasZero = false }
            if hasZero { count -= 1 }
            return hasZero
        }
        var hole = home(row)
        while true {
            let key = keys[hole]
            if key == row { break }
            if key == 0 { return false }
            hole = (hole + 1) & mask
        }
        var index = hole
        while true {
            index = (index + 1) & mask
            let key = keys[index]
            if key == 0 { break }
            // The key may fill the hole unless its home lies cyclically in
            // (hole, index]: then its probe path never passes the hole.
            let home = home(key)
            let stays = hole <= index ? (hole < home && home <= index) : (hole < home || home <= index)
            if !stays {
                keys[hole] = key
                hole = index
            }
        }
        keys[hole] = 0
        count -= 1
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

extension RowSet: Sequence {
    /// The rows of the set in table order (close to row order for the
    /// dense rows a store allocates); row 0 first when present.
    struct Iterator: IteratorProtocol {
        fileprivate let keys: [Int64]
        fileprivate var index: Int
        fileprivate var zeroPending: Bool

        mutating func next() -> Int64? {
            if zeroPending {
                zeroPending = false
                return 0
            }
            while index < keys.count {
                let key = keys[index]
                index += 1
                if key != 0 { return key }
            }
            return nil
        }
    }

    func makeIterator() -> Iterator { Iterator(keys: keys, index: 0, zeroPending: hasZero) }

    var underestimatedCount: Int { count }
}
