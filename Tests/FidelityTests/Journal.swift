// Swift 5 language mode: `let` identifiers set in init, classes that are
// not final, a non-optional to-one relationship, extensions of the model.
import Foundation
import Strata

@Model
class Journal {
    let id: UUID
    let createdAt: Date
    var title: String
    var entries = [Entry]()
    var mood = Mood.calm

    enum Mood: Int, Codable { case calm, happy, tired }

    init(title: String) {
        self.id = UUID()
        self.createdAt = Date()
        self.title = title
    }
}

extension Journal {
    var entryCount: Int { entries.count }
}

@Model
class Entry {
    let id: UUID
    var text: String
    var words = 0
    var journal: Journal

    init(text: String, journal: Journal) {
        self.id = UUID()
        self.text = text
        self.words = text.split(separator: " ").count
        self.journal = journal
    }
}

@Model
final class Shelf {
    var label = "shelf"
    var books: [Book]! = []
    init(label: String) { self.label = label }
}

@Model
final class Book {
    var title = ""
    var shelf: Shelf?
    init(title: String) { self.title = title }
}

/// A relationship declared `let`: it could never load, so the container
/// refuses it.
@Model
final class Badge {
    let holder: Journal?
    init(holder: Journal?) { self.holder = holder }
}

/// A required to-one without an inverse (Journal has no relationship back).
@Model
final class Stamp {
    var label = ""
    var journal: Journal
    init(label: String, journal: Journal) {
        self.label = label
        self.journal = journal
    }
}
