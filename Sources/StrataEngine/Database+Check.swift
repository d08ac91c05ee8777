/// What ``Database/check(progress:)`` found.
public struct CheckReport: Sendable, CustomStringConvertible {
    /// One line per problem: the page, the tree and the reason.
    public var problems: [String] = []
    /// The store's page size, in bytes.
    public var pageSize = 0
    /// The pages of the checked snapshot, the header page included.
    public var pageCount = 0
    /// The pages on the freelist, its trunk pages included.
    public var freePages = 0
    /// Every tree with its entry count and height.
    public var trees: [TreeStatistics] = []

    /// True when no problem was found.
    public var isHealthy: Bool { problems.isEmpty }

    /// A summary: the page counts, a line per tree, then "ok" or the problems.
    public var description: String {
        var lines = ["pages: \(pageCount) of \(pageSize) bytes, \(freePages) free"]
        for t in trees { lines.append("tree \(t.name): \(t.entries) entries, height \(t.height), \(t.pages) pages") }
        lines.append(problems.isEmpty ? "ok" : "\(problems.count) problem(s):")
        lines += problems.map { "  " + $0 }
        return lines.joined(separator: "\n")
    }
}

/// Shape of one tree, as ``Database/check(progress:)`` measured it.
public struct TreeStatistics: Sendable, Equatable {
    /// The tree's name in the catalog.
    public var name: String
    /// The entries found in the tree's leaves.
    public var entries: Int
    /// The levels from the root to the leaves: 1 for a tree whose root is a
    /// leaf.
    public var height: Int
    /// The tree's pages, its overflow pages not included.
    public var pages: Int
}

extension Database {
    /// Walks the whole store in a snapshot: every page must be reachable
    /// exactly once from the catalog, a tree or the freelist; every page
    /// must pass its checksum and structure checks; keys must be ordered in
    /// every page and across pages; overflow chains must hold exactly their
    /// value's length; entry counts must match the catalog. Never throws for
    /// damage: it reports it. Throws only when the handle is closed.
    ///
    /// `progress`, when given, is called now and then with the pages
    /// checked so far and the store's page count.
    public func check(progress: ((_ done: Int, _ total: Int) -> Void)? = nil) throws -> CheckReport {
        let tx = try beginRead()
        defer { tx.end() }
        var checker = Checker(tx: tx)
        checker.progress = progress
        let report = checker.run()
        progress?(report.pageCount, report.pageCount)
        return report
    }
}

private struct Checker {
    let tx: ReadTransaction
    var report = CheckReport()
    var owner: [UInt32: String] = [:]
    let pageCount: UInt32
    var progress: ((Int, Int) -> Void)?

    init(tx: ReadTransaction) {
        self.tx = tx
        pageCount = tx.snapshot.header.pageCount
    }

    mutating func problem(_ text: String) {
        if report.problems.count < 1000 { report.problems.append(text) }
    }

    /// Claims a page for `what`; reports a page claimed twice.
    mutating func claim(_ page: UInt32, _ what: String) -> Bool {
        guard page < pageCount else {
            problem("page \(page) (\(what)) is beyond the store's \(pageCount) pages")
            return false
        }
        if let previous = owner[page] {
            problem("page \(page) is reachable twice: from \(previous) and from \(what)")
            return false
        }
        if let progress, owner.count % 4096 == 0 { progress(owner.count, Int(pageCount)) }
        owner[page] = what
        return true
    }

    mutating func run() -> CheckReport {
        report.pageSize = tx.db.pageSize
        report.pageCount = Int(pageCount)
        _ = claim(0, "header")
        // Catalog, then each tree it names.
        var entries: [(String, UInt32, Int)] = []
        var malformed: [String] = []
        let transaction = tx
        _ = walk(root: FileHeader.catalogRoot, name: "catalog") { key, value, page in
            let name = String(decoding: key, as: UTF8.self)
            if let (root, count) = try? transaction.decodeCatalogValue(value, name: name) {
                entries.append((name, root, count))
            } else {
                malformed.append("page \(page) (catalog): entry \(name.debugDescription) is malformed")
            }
        }
        for text in malformed { problem(text) }
        for (name, root, count) in entries {
            let stats = walk(root: root, name: name) { _, _, _ in }
            if stats.entries != count {
                problem("tree \(name): catalog counts \(count) entries, the tree holds \(stats.entries)")
            }
            report.trees.append(stats)
        }
        checkFreelist()
        for page in 0..<pageCount where owner[page] == nil {
            problem("page \(page) is neither in a tree nor free (leaked)")
            if report.problems.count >= 1000 { break }
        }
        return report
    }

    mutating func checkFreelist() {
        var trunk = tx.snapshot.header.freelistHead
        var free = 0
        while trunk != 0 {
            guard claim(trunk, "freelist trunk") else { return }
            free += 1
            guard let page = try? tx.page(trunk), page.u8(4) == PageType.freelistTrunk.rawValue else {
                problem("page \(trunk) (freelist): unreadable or not a freelist trunk")
                return
            }
            let n = Int(page.u32(12))
            guard n <= Layout.trunkCapacity(pageSize: tx.db.pageSize) else {
                problem("page \(trunk) (freelist): lists \(n) pages")
                return
            }
            for i in 0..<n where claim(page.u32(Layout.trunkHeaderSize + 4 * i), "freelist") { free += 1 }
            trunk = page.u32(8)
        }
        report.freePages = free
        if free != Int(tx.snapshot.header.freeCount) {
            problem("header counts \(tx.snapshot.header.freeCount) free pages, the freelist holds \(free)")
        }
    }

    /// Walks one tree depth-first, checking order and bounds.
    mutating func walk(root: UInt32, name: String, visit: (([UInt8], [UInt8], UInt32) -> Void)) -> TreeStatistics {
        var stats = TreeStatistics(name: name, entries: 0, height: 0, pages: 0)
        var leafDepth: Int?
        // (page, depth, lower bound inclusive, upper bound exclusive)
        var stack: [(UInt32, Int, [UInt8]?, [UInt8]?)] = [(root, 1, nil, nil)]
        var previousKey: [UInt8]?
        while let (number, depth, lower, upper) = stack.popLast() {
            guard claim(number, "tree \(name)") else { continue }
            stats.pages += 1
            let node: Node
            do {
                node = try tx.treeNode(number)
            } catch {
                problem("\(error) (tree \(name))")
                continue
            }
            if depth > Cursor.maxDepth {
                problem("page \(number) (tree \(name)): deeper than \(Cursor.maxDepth) levels")
                continue
            }
            if number != root && node.count == 0 && node.isLeaf {
                problem("page \(number) (tree \(name)): empty leaf")
            }
            var last: [UInt8]? = nil
            for i in 0..<node.count {
                let key = node.keyBytes(i)
                if let last, !last.lexicographicallyPrecedes(key) {
                    problem("page \(number) (tree \(name)): key \(i) is not above the key before it")
                }
                if let lower, key.lexicographicallyPrecedes(lower) {
                    problem("page \(number) (tree \(name)): key \(i) is below its parent's separator")
                }
                if let upper, !key.lexicographicallyPrecedes(upper) {
                    problem("page \(number) (tree \(name)): key \(i) is not below its parent's separator")
                }
                last = key
            }
            if node.isLeaf {
                if let d = leafDepth, d != depth {
                    problem("page \(number) (tree \(name)): leaf at depth \(depth), others at \(d)")
                }
                leafDepth = depth
                stats.height = max(stats.height, depth)
                for i in 0..<node.count {
                    let key = node.keyBytes(i)
                    if let previousKey, !previousKey.lexicographicallyPrecedes(key) {
                        problem("page \(number) (tree \(name)): key \(i) is out of order across pages")
                    }
                    previousKey = key
                    stats.entries += 1
                    switch node.leafValue(i) {
                    case .inline(let p, let n):
                        visit(key, [UInt8](UnsafeRawBufferPointer(start: p, count: n)), number)
                    case .overflow(let first, let length):
                        if let value = checkOverflow(first: first, length: length, tree: name, leaf: number) {
                            visit(key, value, number)
                        }
                    }
                }
            } else {
                // Children are pushed right to left so they pop in key order.
                for i in stride(from: node.count, through: 0, by: -1) {
                    let lo = i == 0 ? lower : node.keyBytes(i - 1)
                    let hi = i == node.count ? upper : node.keyBytes(i)
                    stack.append((node.child(i), depth + 1, lo, hi))
                }
            }
        }
        return stats
    }

    mutating func checkOverflow(first: UInt32, length: Int, tree: String, leaf: UInt32) -> [UInt8]? {
        var number = first
        while number != 0 {
            guard claim(number, "overflow of tree \(tree)") else { return nil }
            guard let page = try? tx.page(number), page.u8(4) == PageType.overflow.rawValue else {
                problem("page \(number) (tree \(tree)): unreadable or not an overflow page (chain from leaf \(leaf))")
                return nil
            }
            number = page.u32(8)
        }
        do {
            return try tx.readOverflow(first: first, length: length)
        } catch {
            problem("\(error) (overflow chain of leaf \(leaf), tree \(tree))")
            return nil
        }
    }
}
