/// Where a writer's descent into a tree ended: the leaf, and the first
/// 8 bytes (``Node/prefix(_:_:)``) of the separators that bound its keys.
///
/// A save that changes models in row order looks up and rewrites rows that
/// share leaves: a tenth of a table's rows changed touches each leaf about
/// eight times. A lookup or put whose key lies strictly between a finger's
/// bounds goes straight to its leaf instead of descending from the root.
///
/// A finger stays right while the tree keeps its shape: cells put into or
/// removed from a leaf leave its separators as they are, so a key between
/// them still belongs to that leaf. Anything that changes the shape (a page
/// allocated or freed, cells moved between siblings) advances the writer's
/// ``ReadTransaction/shape``, which voids every finger taken before.
struct Finger {
    /// The tree's root; 0 (the file header's page, never a root) when empty.
    var root: UInt32 = 0
    var leaf: UInt32 = 0
    /// The prefixes of the separators below and above the leaf's keys; nil
    /// where the leaf is the tree's first or last.
    var low: UInt64?
    var high: UInt64?
    /// The writer's ``ReadTransaction/shape`` when it was taken.
    var shape: UInt64 = 0

    /// True when every key with prefix `prefix` lies between the bounds. A
    /// key whose prefix exceeds another's sorts after it, so strict
    /// comparisons decide; a key whose prefix equals a bound's is left to a
    /// descent.
    @inline(__always) func covers(_ prefix: UInt64) -> Bool {
        if let low, low >= prefix { return false }
        if let high, prefix >= high { return false }
        return true
    }
}

/// The separators around the path of a descent, for a ``Finger``: each
/// level's replace the level above's, being tighter.
struct FingerBounds {
    var low: UInt64?
    var high: UInt64?

    @inline(__always) mutating func narrow(to branch: Node, child: Int) {
        branch.narrowBounds(around: child, low: &low, high: &high)
    }
}

extension Node {
    /// Sets `low` and `high` to the prefixes of this branch's separators
    /// below and above child `child`, where it has them (a first or last
    /// child leaves the bound from the levels above).
    @inline(__always) func narrowBounds(around child: Int, low: inout UInt64?, high: inout UInt64?) {
        if child > 0 {
            let (p, n) = key(child - 1)
            low = Node.prefix(p, n)
        }
        if child < count {
            let (p, n) = key(child)
            high = Node.prefix(p, n)
        }
    }
}

extension ReadTransaction {
    /// The leaf a finger of tree `root` leads `key` to, or nil (always in a
    /// reader, which keeps no fingers).
    @inline(__always) func fingerLeaf(root: UInt32, _ key: UnsafeRawPointer, _ keyCount: Int) -> Finger? {
        guard let fingers else { return nil }
        let prefix = Node.prefix(key, keyCount)
        for i in 0..<Self.maxFingers {
            let finger = fingers[i]
            if finger.root == root && finger.shape == shape && finger.covers(prefix) { return finger }
        }
        return nil
    }

    /// Notes that a descent of tree `root` ended in `leaf`, between `bounds`.
    @inline(__always) func takeFinger(root: UInt32, leaf: UInt32, _ bounds: FingerBounds) {
        guard let fingers else { return }
        var slot = -1
        for i in 0..<Self.maxFingers where fingers[i].root == root {
            slot = i
            break
        }
        if slot < 0 {
            slot = nextFingerSlot
            nextFingerSlot = (nextFingerSlot + 1) % Self.maxFingers
        }
        fingers[slot] = Finger(root: root, leaf: leaf, low: bounds.low, high: bounds.high, shape: shape)
    }
}
