// Trees: creating, dropping, renaming and clearing them, and their
// catalog entries.

extension WriteTransaction {
    /// Creates the tree called `name`, or returns it when it exists.
    @discardableResult public func createTree(_ name: String) throws -> Tree {
        try checkOpen()
        return try changing {
            if let existing = try treeIfPresent(name) { return existing }
            let key = Array(name.utf8)
            guard !key.isEmpty, key.count <= 255 else {
                throw StorageError.invalidTreeName("tree names are 1 to 255 UTF-8 bytes: \(name.debugDescription)")
            }
            let (root, page) = try allocate()
            catalogBase = nil
            Node.format(page, leaf: true)
            counts[root] = 0
            changedTrees[root] = name
            try BTreeWriter(tx: self).putRaw(key, catalogValue(root: root, count: 0), root: FileHeader.catalogRoot)
            return newInstance(name, root: root)
        }
    }

    /// Deletes the tree called `name` and frees all its pages. Returns false
    /// when there was no such tree. Its handles are stale from then on (see
    /// ``Tree``), even if a tree of that name is created again.
    @discardableResult public func dropTree(_ name: String) throws -> Bool {
        try checkOpen()
        return try changing {
            guard let tree = try treeIfPresent(name) else { return false }
            catalogBase = nil
            // The handles go first: from here on the tree is half freed.
            treeInstances[tree.root] = (nil, 0)
            treeEpoch &+= 1
            modifications += 1
            try freeSubtree(tree.root)
            counts.removeValue(forKey: tree.root)
            changedTrees.removeValue(forKey: tree.root)
            lastTouched = nil
            _ = try BTreeWriter(tx: self).deleteRaw(Array(name.utf8), root: FileHeader.catalogRoot)
            return true
        }
    }

    /// Renames tree `from` to `to`, which must not exist; its entries and
    /// root stay. Handles of the old name are stale afterwards (see
    /// ``Tree``). For the package's own use (a migration builds a table's
    /// new records in a fresh tree, in key order, then renames it).
    @discardableResult package func renameTree(_ from: String, to: String) throws -> Tree {
        try checkOpen()
        return try changing {
            guard let tree = try treeIfPresent(from) else { throw StorageError.noSuchTree(from) }
            let key = Array(to.utf8)
            guard !key.isEmpty, key.count <= 255 else {
                throw StorageError.invalidTreeName("tree names are 1 to 255 UTF-8 bytes: \(to.debugDescription)")
            }
            guard try treeIfPresent(to) == nil else { throw StorageError.invalidTreeName("a tree named \(to) exists") }
            let value = catalogValue(root: tree.root, count: try count(tree))
            catalogBase = nil
            treeEpoch &+= 1
            modifications += 1
            _ = try BTreeWriter(tx: self).deleteRaw(Array(from.utf8), root: FileHeader.catalogRoot)
            try BTreeWriter(tx: self).putRaw(key, value, root: FileHeader.catalogRoot)
            changedTrees[tree.root] = to
            lastTouched = nil
            return newInstance(to, root: tree.root)
        }
    }

    /// Removes every entry of `tree`, keeping the tree.
    public func clear(_ tree: Tree) throws {
        try checkOpen()
        try checkHandle(tree)
        try changing {
            let root = try treeNode(tree.root)
            if !root.isLeaf {
                for i in 0...root.count { try freeSubtree(root.child(i)) }
            } else {
                for i in 0..<root.count {
                    if case .overflow(let first, _) = root.leafValue(i) { try BTreeWriter(tx: self).freeOverflow(first) }
                }
            }
            Node.format(try writable(tree.root), leaf: true)
            counts[tree.root] = 0
            changedTrees[tree.root] = tree.name
            modifications += 1
        }
    }

    func freeSubtree(_ number: UInt32) throws {
        var stack: [(UInt32, Int)] = [(number, 0)]
        while let (page, depth) = stack.popLast() {
            guard depth <= Cursor.maxDepth else { throw StorageError.corrupt(page: page, reason: "tree too deep: a cycle") }
            let node = try treeNode(page)
            if node.isLeaf {
                for i in 0..<node.count {
                    if case .overflow(let first, _) = node.leafValue(i) { try BTreeWriter(tx: self).freeOverflow(first) }
                }
            } else {
                for i in 0...node.count { stack.append((node.child(i), depth + 1)) }
            }
            free(page)
        }
    }

    func catalogValue(root: UInt32, count: Int) -> [UInt8] {
        var v = [UInt8](repeating: 0, count: Self.catalogValueSize)
        v.withUnsafeMutableBytes { Self.writeCatalogValue(root: root, count: count, into: $0.baseAddress!) }
        return v
    }

    /// A catalog entry's value: the tree's root page, then its entry count.
    static let catalogValueSize = 12

    /// Writes a catalog entry's value (``catalogValueSize`` bytes) at `p`.
    static func writeCatalogValue(root: UInt32, count: Int, into p: UnsafeMutableRawPointer) {
        storeBE32(p, root)
        storeBE64(p + 4, UInt64(count))
    }
}
