/// A context's identity map for one entity: row id → registered model.
///
/// An open-addressing table with linear probing and backward-shift
/// deletion (no tombstones). Key 0 marks an empty slot; row 0, which the
/// store never allocates, lives in a slot of its own so the map is total. It exists because every fetched row is registered: the standard
/// `Dictionary` hashes each `Int64` with SipHash and scatters consecutive
/// rows over the table, which cost more than decoding a small record. Row
/// ids are not attacker-chosen hash keys (the store allocates them in
/// sequence), so a cheap hash that keeps order is enough.
struct RowMap {
    private var keys: [Int64]
    private var values: [(any PersistentModel)?]
    private var zero: (any PersistentModel)?
    private(set) var count = 0
    /// `keys.count - 1`; the table size is a power of two.
    private var mask: Int

    init(minimumCapacity: Int = 0) {
        var size = 8
        while size * 3 < minimumCapacity * 4 { size <<= 1 }
        keys = Array(repeating: 0, count: size)
        values = Array(repeating: nil, count: size)
        mask = size - 1
    }

    var isEmpty: Bool { count == 0 }

    /// The slot a row hashes to: its low bits, plus a multiplicative hash
    /// of the bits above the table's size. Consecutive rows (the common
    /// case: the store allocates them in sequence and scans return them in
    /// order) land in consecutive slots, so a fetch touches the table
    /// sequentially; rows that differ only above the mask (a stride of the
    /// table size) are still spread out.
    private func home(_ row: Int64) -> Int {
        let key = UInt64(bitPattern: row)
        let high = (key >> UInt64(mask.nonzeroBitCount)) &* 0x9E37_79B9_7F4A_7C15
        return Int(truncatingIfNeeded: key &+ high) & mask
    }

    private func slot(of row: Int64) -> Int? {
        var index = home(row)
        while true {
            let key = keys[index]
            if key == row { return index }
            if key == 0 { return nil }
            index = (index + 1) & mask
        }
    }

    subscript(row: Int64) -> (any PersistentModel)? {
        get { row == 0 ? zero : slot(of: row).flatMap { values[$0] } }
        set {
            if row == 0 {
                count += (newValue == nil ? 0 : 1) - (zero == nil ? 0 : 1)
                zero = newValue
            } else if let newValue {
                insert(row, newValue)
            } else {
                remove(row)
            }
        }
    }

    /// Makes room for `extra` more entries without rehashing on the way.
    mutating func reserve(_ extra: Int) {
        if (count + extra) * 4 > keys.count * 3 { rehash(minimumCapacity: count + extra) }
    }

    private mutating func insert(_ row: Int64, _ model: any PersistentModel) {
        if (count + 1) * 4 > keys.count * 3 { rehash(minimumCapacity: count + 1) }
        var index = home(row)
        while true {
            let key = keys[index]
            if key == row {
                values[index] = model
                return
            }
            if key == 0 {
                keys[index] = row
                values[index] = model
                count += 1
                return
            }
            index = (index + 1) & mask
        }
    }

    private mutating func remove(_ row: Int64) {
        guard var hole = slot(of: row) else { return }
        keys[hole] = 0
        values[hole] = nil
        count -= 1
        // Shift later members of the probe run back so lookups that pass
        // the hole still find them.
        var index = (hole + 1) & mask
        while keys[index] != 0 {
            let wanted = home(keys[index])
            // Move the entry unless its home lies cyclically in (hole, index].
            let stays = hole <= index ? (hole < wanted && wanted <= index) : (hole < wanted || wanted <= index)
            if !stays {
                keys[hole] = keys[index]
                values[hole] = values[index]
                keys[index] = 0
                values[index] = nil
                hole = index
            }
            index = (index + 1) & mask
        }
    }

    private mutating func rehash(minimumCapacity: Int) {
        var bigger = RowMap(minimumCapacity: max(minimumCapacity, keys.count))
        bigger.zero = zero
        bigger.count = zero == nil ? 0 : 1
        for (index, key) in keys.enumerated() where key != 0 {
            if let value = values[index] { bigger.insert(key, value) }
        }
        self = bigger
    }

    /// Every registered model, in no particular order.
    var models: [any PersistentModel] { values.compactMap { $0 } + (zero.map { [$0] } ?? []) }
}
