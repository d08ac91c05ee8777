import StrataTesting
import XCTest

@testable import StrataEngine

/// A cell put into the hole a removed cell left: the page keeps its heap
/// where it was (no compaction), counts the hole's rest as fragmented, and
/// stays valid.
final class NodeHoleTests: EngineTestCase {
    /// A leaf cell of a 16-byte key made from `i` and a value of `length`.
    private func cell(_ i: Int, length: Int) -> [UInt8] {
        let key = (0..<16).map { UInt8(truncatingIfNeeded: i >> (8 * ($0 % 4))) &+ UInt8($0) }
        return [16, UInt8(length)] + key + [UInt8](repeating: UInt8(truncatingIfNeeded: i), count: length)
    }

    /// A full leaf of 118-byte cells inserted in a scattered order, so
    /// that the heap does not follow key order.
    private func fullLeaf() -> (Page, Node, [[UInt8]]) {
        let page = Page.zeroed(4096)
        let node = Node(page: page)
        node.format(leaf: true)
        let cells = (0..<34).map { cell($0, length: 100) }
        for i in (0..<34).map({ ($0 * 7) % 34 }) {
            let key = cells[i][2..<18]
            let position = (0..<node.count).first { !node.keyBytes($0).lexicographicallyPrecedes(key) } ?? node.count
            XCTAssertTrue(cells[i].withUnsafeBytes { node.insertCell(at: position, $0.baseAddress!, $0.count) })
        }
        return (page, node, cells)
    }

    func testACellGoesIntoAHoleWhenTheGapHoldsOnlyItsSlot() throws {
        let (_, node, cells) = fullLeaf()
        XCTAssertLessThan(node.heapStart - (Layout.nodeHeaderSize + 2 * node.count), 120, "the leaf is full")
        // The last five cells by key leave; the highest placed one is the hole.
        let leaving = Array(29..<34)
        let hole = leaving.map { node.slot($0) }.max()!
        node.removeCells(sortedIndices: leaving)
        let heap = node.heapStart
        XCTAssertGreaterThanOrEqual(hole, heap, "the hole is not next to the gap")
        let fragmented = node.fragmented
        let smaller = cell(40, length: 90)
        let ok = smaller.withUnsafeBytes { node.insertCell(at: node.count, $0.baseAddress!, $0.count, hole: hole) }
        XCTAssertTrue(ok)
        XCTAssertEqual(node.heapStart, heap, "the heap was compacted")
        XCTAssertEqual(node.fragmented, fragmented - smaller.count)
        XCTAssertEqual(node.slot(node.count - 1), hole)
        XCTAssertEqual(node.cellSize(node.count - 1), smaller.count)
        try node.validate(pageNumber: 1)
        for i in 0..<29 { XCTAssertEqual(node.keyBytes(i), Array(cells[i][2..<18])) }
    }

    func testACellTheGapHoldsGoesIntoTheGap() throws {
        let (_, node, _) = fullLeaf()
        // The cell placed last sits at the heap's start; when it leaves,
        // the heap shrinks back over it and the gap holds a new cell.
        let placed = node.heapStart
        let leaving = (0..<34).filter { node.slot($0) == placed } + [0]
        node.removeCells(sortedIndices: Array(Set(leaving)).sorted())
        XCTAssertLessThan(placed, node.heapStart)
        let heap = node.heapStart
        let fragmented = node.fragmented
        let new = cell(41, length: 100)
        let ok = new.withUnsafeBytes { node.insertCell(at: 0, $0.baseAddress!, $0.count, hole: placed) }
        XCTAssertTrue(ok)
        XCTAssertEqual(node.heapStart, heap - new.count, "the cell did not go into the gap")
        XCTAssertEqual(node.fragmented, fragmented)
        try node.validate(pageNumber: 1)
    }

    /// A larger cell in place of another: every other cell keeps its
    /// bytes, whatever the count of cells (the slot pass goes eight at a
    /// time, then one by one) and wherever the cells lie in the heap.
    func testALargerCellReplacesAnotherAndEveryOtherKeepsItsBytes() throws {
        for count in [1, 7, 8, 9, 16, 17, 23, 30] {
            for replaced in Set([0, count / 2, count - 1]).sorted() {
                let page = Page.zeroed(4096)
                let node = Node(page: page)
                node.format(leaf: true)
                var cells = (0..<count).map { cell($0, length: 40 + $0 % 5) }
                // Put in a scattered order, so that the heap does not follow key order.
                for i in (0..<count).sorted(by: { ($0 * 37) % 101 < ($1 * 37) % 101 }) {
                    let key = cells[i][2..<18]
                    let position =
                        (0..<node.count).first { !node.keyBytes($0).lexicographicallyPrecedes(key) } ?? node.count
                    XCTAssertTrue(cells[i].withUnsafeBytes { node.insertCell(at: position, $0.baseAddress!, $0.count) })
                }
                XCTAssertEqual(node.count, count)
                // Cells by key order, as the node holds them.
                cells.sort { $0[2..<18].lexicographicallyPrecedes($1[2..<18]) }
                var larger = cells[replaced]
                larger[1] &+= 9
                larger += [UInt8](repeating: 0xA5, count: 9)
                let ok = larger.withUnsafeBytes { node.replaceCell(at: replaced, $0.baseAddress!, $0.count) }
                XCTAssertTrue(ok, "\(count) cells, cell \(replaced)")
                cells[replaced] = larger
                try node.validate(pageNumber: 1)
                for i in 0..<count {
                    let stored = Array(UnsafeRawBufferPointer(start: node.bytes + node.slot(i), count: node.cellSize(i)))
                    XCTAssertEqual(stored, cells[i], "\(count) cells, cell \(replaced) replaced, cell \(i)")
                }
            }
        }
    }
}
