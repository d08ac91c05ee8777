/// A bounded cache of verified page images, replaced with the CLOCK
/// algorithm. Not thread-safe: the database guards it with its state lock.
///
/// Keys name an immutable page *version*: a main-file page (`mainKey`) or a
/// WAL frame of one generation (`frameKey`). A main-file key is rewritten
/// only by a checkpoint (or a fresh page's write), which replaces or drops
/// the cached image in the same step.
struct PageCache {
    private struct Slot {
        var key: UInt64
        var page: Page
        var referenced: Bool
    }

    private var map: PageMap
    private var slots: [Slot] = []
    private var hand = 0
    let capacity: Int

    init(capacityPages: Int) {
        capacity = max(16, capacityPages)
        map = PageMap(capacity: capacity)
    }

    @inline(__always) static func mainKey(_ page: UInt32) -> UInt64 { UInt64(page) }
    @inline(__always) static func frameKey(generation: UInt32, frame: Int) -> UInt64 {
        (1 << 63) | (UInt64(generation & 0x7fff_ffff) << 32) | UInt64(UInt32(truncatingIfNeeded: frame))
    }

    mutating func get(_ key: UInt64) -> Page? {
        guard let i = map[key] else { return nil }
        slots[i].referenced = true
        return slots[i].page
    }

    mutating func put(_ key: UInt64, _ page: Page) {
        if let i = map[key] {
            slots[i].page = page
            slots[i].referenced = true
            return
        }
        if slots.count < capacity {
            map[key] = slots.count
            slots.append(Slot(key: key, page: page, referenced: false))
            return
        }
        while slots[hand].referenced {
            slots[hand].referenced = false
            hand = hand + 1 == slots.count ? 0 : hand + 1
        }
        map.remove(slots[hand].key)
        slots[hand] = Slot(key: key, page: page, referenced: false)
        map[key] = hand
        hand = hand + 1 == slots.count ? 0 : hand + 1
    }

    mutating func remove(_ key: UInt64) {
        guard let i = map.remove(key) else { return }
        let last = slots.count - 1
        if i != last {
            slots[i] = slots[last]
            map[slots[i].key] = i
        }
        slots.removeLast()
        if hand >= slots.count { hand = 0 }
    }

    /// Drops every WAL-frame entry (after a WAL restart their keys would be
    /// reused by the next generation only modulo 2^31, but they are dead).
    mutating func removeFrames() { removeAll(frames: true) }

    /// Drops every main-file entry: another handle's checkpoint may have
    /// rewritten those pages.
    mutating func removeMainPages() { removeAll(frames: false) }

    /// Drops every entry of one kind (a frame's key has its top bit set).
    /// When they are a quarter of the entries or more, the map is emptied
    /// in place and the rest are indexed again, instead of removing each
    /// with a probe and a backward shift: the log's restart after each
    /// checkpoint went from 2,800 to 2,400 instructions a one-object save
    /// on average, most of what is left freeing the pages.
    private mutating func removeAll(frames: Bool) {
        let kind: UInt64 = frames ? 1 : 0
        var doomed = 0
        for slot in slots where slot.key >> 63 == kind { doomed += 1 }
        guard doomed > 0 else { return }
        if doomed * 4 < slots.count {
            var i = 0
            while i < slots.count {
                if slots[i].key >> 63 == kind { remove(slots[i].key) } else { i += 1 }
            }
            return
        }
        slots.removeAll { $0.key >> 63 == kind }
        map.removeAll()
        for (i, slot) in slots.enumerated() { map[slot.key] = i }
        hand = 0
    }

    mutating func removeAll() {
        map = PageMap(capacity: capacity)
        slots.removeAll()
        hand = 0
    }
}

/// The page cache's index: page key → slot, an open-addressing table with
/// linear probing and a multiplicative hash.
///
/// The standard `Dictionary` hashes every key with SipHash, which a cache
/// lookup on every page access pays for; keys here are page numbers and
/// WAL frame keys the store makes itself, not input an attacker chooses,
/// so a cheap hash is enough. Removal shifts the following run back
/// (no tombstones), and the table is sized at twice the cache's capacity,
/// so it never fills.
struct PageMap {
    private var keys: [UInt64]
    /// Slot of each key, or -1 for an empty bucket.
    private var values: [Int32]
    private let mask: Int

    init(capacity: Int) {
        var size = 16
        while size < capacity * 2 { size <<= 1 }
        keys = Array(repeating: 0, count: size)
        values = Array(repeating: -1, count: size)
        mask = size - 1
    }

    @inline(__always) private func home(_ key: UInt64) -> Int {
        Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) >> 32) & mask
    }

    @inline(__always) subscript(key: UInt64) -> Int? {
        get {
            var i = home(key)
            while true {
                let value = values[i]
                if value < 0 { return nil }
                if keys[i] == key { return Int(value) }
                i = (i + 1) & mask
            }
        }
        set {
            guard let newValue else {
                remove(key)
                return
            }
            var i = home(key)
            while values[i] >= 0 && keys[i] != key { i = (i + 1) & mask }
            keys[i] = key
            values[i] = Int32(newValue)
        }
    }

    /// Empties the table in place (a `memset` of the slots' column).
    mutating func removeAll() {
        values.withUnsafeMutableBufferPointer { $0.update(repeating: -1) }
    }

    /// Removes `key`; returns its slot, if it was present.
    @discardableResult mutating func remove(_ key: UInt64) -> Int? {
        var i = home(key)
        while true {
            if values[i] < 0 { return nil }
            if keys[i] == key { break }
            i = (i + 1) & mask
        }
        let removed = Int(values[i])
        // Backward shift: move later entries of the run into the hole when
        // their home does not lie (cyclically) after the hole.
        var hole = i
        var j = (i + 1) & mask
        while values[j] >= 0 {
            let h = home(keys[j])
            let distanceToJ = (j - h) & mask
            let distanceToHole = (j - hole) & mask
            if distanceToJ >= distanceToHole {
                keys[hole] = keys[j]
                values[hole] = values[j]
                hole = j
            }
            j = (j + 1) & mask
        }
        values[hole] = -1
        return removed
    }
}
