import Foundation
import Strata

// A hierarchy and the same data flat (a kind column), for the differential
// test of inheritance.

@Model class Animal {
    #Index<Animal>([\.age])
    @Attribute(.unique) var name: String
    var age: Int
    init(name: String, age: Int) {
        self.name = name
        self.age = age
    }
}

@Model class Dog: Animal {
    var breed: String
    var good: Bool = true
    init(name: String, age: Int, breed: String) {
        self.breed = breed
        super.init(name: name, age: age)
    }
}

@Model final class Puppy: Dog {
    var teeth: Int
    init(name: String, age: Int, breed: String, teeth: Int) {
        self.teeth = teeth
        super.init(name: name, age: age, breed: breed)
    }
}

@Model final class Cat: Animal {
    var lives: Int = 9
    init(name: String, age: Int, lives: Int) {
        self.lives = lives
        super.init(name: name, age: age)
    }
}

@Model final class FlatAnimal {
    #Index<FlatAnimal>([\.age])
    @Attribute(.unique) var name: String
    var kind: String
    var age: Int
    var breed: String?
    var good: Bool?
    var teeth: Int?
    var lives: Int?
    init(name: String, kind: String, age: Int) {
        self.name = name
        self.kind = kind
        self.age = age
    }
}
